/* memdir._scan: the directory scan every command runs, in C.
 *
 * scan(dir_fd) -> {name: (st_mtime_ns, st_size)} for the memory files of the directory open
 * at dir_fd: names ending in ".md", not starting with '.', not "MEMORY.md", valid UTF-8,
 * that are regular files. A symlink is not followed but skipped, as a FIFO or a device is:
 * a memory directory may hold anything someone committed, and memdir reads only regular
 * files it can open without following a link (memdir.safe_open). The same result as
 * memdir.files.scan_dir's Python loop, which remains the fallback where this extension is
 * not built.
 *
 * names_sum(dir_fd) -> (count, sum of CRC-32s) of the memory file names listed there (any
 * kind of entry), as memdir.fingerprint computes it after every write.
 *
 * fingerprint(dir_fd) -> (count, sum of st_mtime_ns, sum of st_size, sum of name CRC-32s) of
 * the files scan() would return, without building them: what reconcile compares before every
 * command, where the directory almost always has not changed. The fstatat() calls (nearly
 * all of the time, in the kernel) are split between two threads, the GIL released.
 *
 * Why C: os.stat() builds a stat_result of 19 fields (three float and three nanosecond
 * times among them) for every file, and scanning 10,000 files cost about 100 million
 * instructions in Python, a sixth of a whole `memdir context` process. Here each file costs
 * one fstatat() and one small tuple.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __APPLE__
#define MTIME(st) ((st).st_mtimespec)
#else
#define MTIME(st) ((st).st_mtim)
#endif

/* Close a listing, its offset back at 0 first: the offset is shared with the caller's
 * descriptor (a dup), and os.listdir(fd) would otherwise find it at the end. */
static void
finish(DIR *dir)
{
    rewinddir(dir);
    closedir(dir);
}

static int
is_memory_name(const char *name, size_t len)
{
    if (len < 4 || name[0] == '.')
        return 0;
    if (memcmp(name + len - 3, ".md", 3) != 0)
        return 0;
    return strcmp(name, "MEMORY.md") != 0;
}

/* The listing of the directory open at the descriptor ``arg``, from its first entry; NULL
 * with an exception set on failure. fdopendir takes the descriptor it is given over, so it
 * gets a copy: the caller closes its own. */
static DIR *
open_listing(PyObject *arg, int *dir_fd, const char *who)
{
    long value = PyLong_AsLong(arg);
    if (value == -1 && PyErr_Occurred())
        return NULL;
    if (value < 0 || value > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "%s() needs an open directory descriptor", who);
        return NULL;
    }
    *dir_fd = (int)value;
    int fd = dup(*dir_fd);
    if (fd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return NULL;
    }
    DIR *dir = fdopendir(fd);
    if (dir == NULL) {
        PyErr_SetFromErrno(PyExc_OSError);
        close(fd);
        return NULL;
    }
    rewinddir(dir); /* a dup shares the offset: start from the top whatever was read */
    return dir;
}

/* The next memory file name of a listing: 1 with *entry set, 0 at the end, -1 with an
 * exception set. */
static int
next_memory_name(DIR *dir, struct dirent **entry, size_t *len)
{
    for (;;) {
        errno = 0;
        *entry = readdir(dir);
        if (*entry == NULL) {
            if (errno != 0) {
                PyErr_SetFromErrno(PyExc_OSError);
                return -1;
            }
            return 0;
        }
        *len = strlen((*entry)->d_name);
        if (is_memory_name((*entry)->d_name, *len))
            return 1;
    }
}

static PyObject *
scan(PyObject *module, PyObject *arg)
{
    int dir_fd;
    DIR *dir = open_listing(arg, &dir_fd, "scan");
    if (dir == NULL)
        return NULL;
    PyObject *out = PyDict_New();
    if (out == NULL)
        goto fail;
    struct dirent *entry;
    size_t len;
    int more;
    while ((more = next_memory_name(dir, &entry, &len)) == 1) {
        struct stat st;
        if (fstatat(dir_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0
            || !S_ISREG(st.st_mode))
            continue; /* gone meanwhile, a symlink, a folder, a FIFO: not a memory */
        PyObject *name = PyUnicode_DecodeUTF8(entry->d_name, (Py_ssize_t)len, NULL);
        if (name == NULL) { /* not UTF-8: skipped, as doctor reports it */
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                goto fail;
            PyErr_Clear();
            continue;
        }
        long long mtime_ns = (long long)MTIME(st).tv_sec * 1000000000LL + MTIME(st).tv_nsec;
        PyObject *state = Py_BuildValue("(LL)", mtime_ns, (long long)st.st_size);
        if (state == NULL) {
            Py_DECREF(name);
            goto fail;
        }
        int failed = PyDict_SetItem(out, name, state);
        Py_DECREF(name);
        Py_DECREF(state);
        if (failed)
            goto fail;
    }
    if (more < 0)
        goto fail;
    finish(dir);
    return out;
fail:
    Py_XDECREF(out);
    finish(dir);
    return NULL;
}

/* CRC-32 (the IEEE polynomial, as zlib.crc32), so that a sum taken here equals one taken by
 * memdir.fingerprint.names_sum in Python. */
static unsigned long crc_table[256];

static void
make_crc_table(void)
{
    for (unsigned long n = 0; n < 256; n++) {
        unsigned long c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320UL ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

static unsigned long
crc32_of(const unsigned char *data, size_t len)
{
    unsigned long c = 0xFFFFFFFFUL;
    for (size_t i = 0; i < len; i++)
        c = crc_table[(c ^ data[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFUL;
}

/* Whether bytes are valid UTF-8 (what os.listdir would decode without surrogates). */
static int
is_utf8(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        size_t n;
        unsigned long cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            n = 1;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            n = 2;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            n = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        for (size_t k = 1; k <= n; k++) {
            if (i + k >= len || (s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        /* overlong forms, surrogates and values past U+10FFFF are not UTF-8 */
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000)
            || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
            return 0;
        i += n + 1;
    }
    return 1;
}

static PyObject *
names_sum(PyObject *module, PyObject *arg)
{
    int dir_fd;
    DIR *dir = open_listing(arg, &dir_fd, "names_sum");
    if (dir == NULL)
        return NULL;
    long long count = 0;
    unsigned long long total = 0;
    struct dirent *entry;
    size_t len;
    int more;
    while ((more = next_memory_name(dir, &entry, &len)) == 1) {
        const unsigned char *name = (const unsigned char *)entry->d_name;
        if (is_utf8(name, len)) { /* what os.listdir decodes without surrogates */
            count++;
            total += crc32_of(name, len);
        }
    }
    finish(dir);
    if (more < 0)
        return NULL;
    return Py_BuildValue("(LK)", count, total);
}

/* The memory file names of a listing, for fingerprint(): one buffer of NUL-terminated names
 * and their offsets into it. */
typedef struct {
    char *text;
    size_t used, size;
    size_t *offsets;
    size_t count, room;
} Names;

static int
names_add(Names *names, const char *name, size_t len)
{
    if (names->used + len + 1 > names->size) {
        size_t size = names->size ? names->size * 2 : 65536;
        while (size < names->used + len + 1)
            size *= 2;
        char *text = realloc(names->text, size);
        if (text == NULL)
            return -1;
        names->text = text;
        names->size = size;
    }
    if (names->count == names->room) {
        size_t room = names->room ? names->room * 2 : 1024;
        size_t *offsets = realloc(names->offsets, room * sizeof(size_t));
        if (offsets == NULL)
            return -1;
        names->offsets = offsets;
        names->room = room;
    }
    memcpy(names->text + names->used, name, len + 1);
    names->offsets[names->count++] = names->used;
    names->used += len + 1;
    return 0;
}

/* The sums over one slice of the names (one thread's share). Seconds and nanoseconds are
 * summed apart: 100,000 mtimes in nanoseconds overflow 64 bits, their seconds do not. */
typedef struct {
    const Names *names;
    int dir_fd;
    size_t start, stop;
    long long count, seconds, nanoseconds, sizes;
    unsigned long long crcs;
} Sums;

static void *
sum_slice(void *arg)
{
    Sums *sums = arg;
    for (size_t i = sums->start; i < sums->stop; i++) {
        const char *name = sums->names->text + sums->names->offsets[i];
        struct stat st;
        if (fstatat(sums->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0
            || !S_ISREG(st.st_mode))
            continue; /* as scan(): gone meanwhile, a symlink, a folder, a FIFO */
        sums->count++;
        sums->seconds += (long long)MTIME(st).tv_sec;
        sums->nanoseconds += (long long)MTIME(st).tv_nsec;
        sums->sizes += (long long)st.st_size;
        sums->crcs += crc32_of((const unsigned char *)name, strlen(name));
    }
    return NULL;
}

/* Below this many files a second thread costs more than it saves. */
#define THREADED 512

static PyObject *
fingerprint(PyObject *module, PyObject *arg)
{
    int dir_fd;
    DIR *dir = open_listing(arg, &dir_fd, "fingerprint");
    if (dir == NULL)
        return NULL;
    Names names = {0};
    struct dirent *entry;
    size_t len;
    int more;
    while ((more = next_memory_name(dir, &entry, &len)) == 1) {
        if (!is_utf8((const unsigned char *)entry->d_name, len))
            continue; /* as scan(): not a name memdir can take */
        if (names_add(&names, entry->d_name, len) != 0) {
            PyErr_NoMemory();
            more = -1;
            break;
        }
    }
    finish(dir);
    if (more < 0) {
        free(names.text);
        free(names.offsets);
        return NULL;
    }
    size_t half = names.count >= THREADED ? names.count / 2 : names.count;
    Sums first = {&names, dir_fd, 0, half, 0, 0, 0, 0, 0};
    Sums second = {&names, dir_fd, half, names.count, 0, 0, 0, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    pthread_t thread;
    int threaded = half < names.count && pthread_create(&thread, NULL, sum_slice, &second) == 0;
    sum_slice(&first);
    if (threaded)
        pthread_join(thread, NULL);
    else
        sum_slice(&second);
    Py_END_ALLOW_THREADS
    free(names.text);
    free(names.offsets);
    long long count = first.count + second.count;
    PyObject *seconds = PyLong_FromLongLong(first.seconds + second.seconds);
    PyObject *billion = PyLong_FromLong(1000000000L);
    PyObject *nanoseconds = PyLong_FromLongLong(first.nanoseconds + second.nanoseconds);
    PyObject *scaled = NULL, *mtimes = NULL, *out = NULL;
    if (seconds && billion && nanoseconds && (scaled = PyNumber_Multiply(seconds, billion))
        && (mtimes = PyNumber_Add(scaled, nanoseconds)))
        out = Py_BuildValue("(LOLK)", count, mtimes, first.sizes + second.sizes,
                            first.crcs + second.crcs);
    Py_XDECREF(seconds);
    Py_XDECREF(billion);
    Py_XDECREF(nanoseconds);
    Py_XDECREF(scaled);
    Py_XDECREF(mtimes);
    return out;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O,
     "scan(dir_fd) -> {name: (mtime_ns, size)} of the memory files in a directory."},
    {"names_sum", names_sum, METH_O,
     "names_sum(dir_fd) -> (count, sum of CRC-32s) of the memory file names (any kind)."},
    {"fingerprint", fingerprint, METH_O,
     "fingerprint(dir_fd) -> (count, sum of mtime_ns, sum of sizes, sum of name CRC-32s) "
     "of the files scan() returns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "memdir._scan",
    "The directory scan every command runs, in C (see memdir.files.scan_dir).", -1, methods,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    make_crc_table();
    return PyModule_Create(&module);
}
