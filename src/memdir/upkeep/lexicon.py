"""The words :mod:`memdir.upkeep.claims` reads by: function words, negations, the cues of contrast
and order, antonyms, numbers, and a light stemmer.

Closed word classes, not lists fitted to examples: every entry is a grammar word or a pair of
opposites a developer's memory uses ("enable" / "disable"). Lower-case, English.

Invariant: :func:`stem` is a pure function of the word (cached), so two texts that use two
forms of one word ("mocks", "mocking") compare equal after it.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["ADVERBS", "ANTONYM", "ANTONYMS", "EARLIER", "FUNCTION", "IRREGULAR", "LATER", "LIGHT",
           "NEGATIONS", "NUMBER", "PIVOTS", "PREFER", "SEQUENCE", "SKIP", "distinct",
           "is_number", "negation", "stem"]

# A number is a token of its own ("15", "3.12", "2026-03-10", "02", "5s", "100mb") or a
# version ("v2", "uuidv7"); digits inside a name ("billing0", "amd64", "e2e") are the name's,
# and so is "#123".
NUMBER = re.compile(r"(?:[a-z]*v)?\d+(?:[.:,\-/]\d+)*(?:ms|s|m|h|d|w|k|kb|mb|gb|tb|x)?")
FUNCTION = frozenset("""
    a an the this that these those it its it's is are was were be been being am do does did
    doing done have has had having i we you he she they them their our your my me us of in
    on at to for with by as into onto from about so if or and but nor also just very
    too there here which who whom what when where how why all any each every some such can
    could should would must may might will shall let lets via per up out both either more
    most less own same other others one ones that's there's
""".split())
# Words a negation skips to reach what it negates: "never use npm" negates npm.
LIGHT = frozenset("use uses using used ever even really actually please also".split())
NEGATIONS = frozenset("""
    not no never without nor cannot avoid avoids avoided avoiding skip skips skipped skipping
    dislike dislikes disliked hate hates hated
""".split())
# What a negation or contrast reaches past to the word it governs: "not in Git LFS".
SKIP = frozenset("""
    the a an be been being to do does did of in on at with for ever even really actually
    also just use uses using used than
""".split())
PREFER = frozenset("prefer prefers preferred preferring favour favours favoured favor "
                   "favors favored choose chooses chose pick picks like likes".split())
# Relational words kept in the order :func:`memdir.upkeep.claims.reordered` compares: "pnpm over
# npm".
PIVOTS = frozenset("over than instead rather to from into before after".split())
EARLIER = frozenset({"first", "firstly", "initially"})
LATER = frozenset({"then", "second", "afterwards", "afterward", "later", "next", "finally"})
# Pairs of words where saying one is saying "not the other" about the same thing (compared
# as stems, so "enabled" / "disables" count too). "before" / "after" are not here: "X before
# Y" and "Y after X" say the same, so they are read as ordered pairs instead.
ANTONYMS = (
    ("enable", "disable"), ("allow", "forbid"), ("allow", "disallow"), ("allow", "deny"),
    ("allow", "prohibit"), ("permit", "forbid"), ("increase", "decrease"), ("min", "max"),
    ("minimum", "maximum"), ("always", "never"), ("on", "off"), ("include", "exclude"),
    ("public", "private"), ("ascending", "descending"), ("sync", "async"),
    ("synchronous", "asynchronous"), ("add", "remove"), ("succeed", "fail"),
    ("success", "failure"), ("accept", "reject"), ("local", "remote"), ("like", "dislike"),
    ("lowercase", "uppercase"), ("first", "last"), ("start", "stop"), ("start", "end"),
    ("true", "false"), ("open", "close"), ("upper", "lower"), ("higher", "lower"),
    ("faster", "slower"), ("more", "less"), ("more", "fewer"), ("inside", "outside"),
    ("above", "below"), ("encrypt", "decrypt"), ("lock", "unlock"), ("required", "optional"),
    ("mandatory", "optional"), ("internal", "external"), ("dark", "light"),
    ("tabs", "spaces"), ("single", "double"), ("rebase", "merge"), ("camelcase", "snake_case"),
    ("headless", "headed"), ("strict", "lenient"), ("verbose", "quiet"), ("old", "new"),
    ("oldest", "newest"), ("mutable", "immutable"), ("stateful", "stateless"),
    ("manual", "automatic"), ("sequential", "parallel"), ("eager", "lazy"),
)


# Irregular forms of the verbs memories are written with: "built" is "build".
IRREGULAR = {w: base for base, forms in (
    ("build", "built"), ("write", "wrote written"), ("run", "ran"), ("send", "sent"),
    ("keep", "kept"), ("make", "made"), ("take", "took taken"), ("go", "went gone"),
    ("hold", "held"), ("choose", "chose chosen"), ("give", "gave given"), ("find", "found"),
    ("leave", "left"), ("read", "read"), ("get", "got gotten"), ("bring", "brought"),
    ("begin", "began begun"), ("break", "broke broken"), ("drive", "drove driven"),
    ("hide", "hid hidden"), ("rise", "rose risen"), ("speak", "spoke spoken"),
    ("catch", "caught"), ("teach", "taught"), ("think", "thought"), ("buy", "bought"),
    ("sell", "sold"), ("tell", "told"), ("say", "said"), ("pay", "paid"), ("lose", "lost"),
    ("mean", "meant"), ("spend", "spent"), ("lead", "led"), ("feed", "fed"),
    ("shut", "shut"), ("bind", "bound"), ("throw", "threw thrown"), ("grow", "grew grown"),
    ("know", "knew known"), ("draw", "drew drawn"), ("show", "shown"), ("forbid",
                                                                          "forbade forbidden"),
) for w in forms.split()}


# A protocol's secure form is another protocol, not a plural: "HTTP to HTTPS" / "HTTPS to HTTP".
_SECURE = frozenset("https wss ftps smtps imaps ldaps".split())


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light stem: the same for "mock", "mocks", "mocked", "mocking" and "rebase",
    "rebasing" (not a linguist's stem: only consistent on the forms that matter here)."""
    if any(c.isdigit() for c in word) or "." in word or "/" in word or word in _SECURE:
        return word
    word = IRREGULAR.get(word, word)
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss") \
                and not word.endswith("eed"):  # need, succeed, proceed
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # running -> run, stopped -> stop
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


ANTONYM = frozenset({(stem(x), stem(y)) for x, y in ANTONYMS}
                    | {(stem(y), stem(x)) for x, y in ANTONYMS})  # both ways, as stems
SEQUENCE = EARLIER | LATER | {"before", "after", "from"}
ADVERBS = frozenset(stem(w) for w in "always usually often sometimes rarely only".split())


def is_number(token: str) -> bool:
    """Whether a token is a number or a version (``NUMBER``), not a name with digits."""
    return NUMBER.fullmatch(token) is not None


def negation(token: str) -> bool:
    """Whether a token negates what follows it ("not", "never", "avoid", any "...n't")."""
    return token in NEGATIONS or token.endswith("n't") or token == "dont"


def distinct(tokens: list[str]) -> list[str]:
    """The stems of the distinctive tokens, in order: not function, light or negation words."""
    return [stem(t) for t in tokens if t not in FUNCTION and t not in LIGHT
            and not negation(t)]
