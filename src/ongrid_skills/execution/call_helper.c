/* The spawn helper's other half: the entry re-check before a spawn and the collection of a
 * call at its exit, each in one C call. Compiled into the same library as spawn_helper.c (the
 * build hashes both files) and called through ctypes by ongrid_skills.execution.spawner.
 *
 * Both exist for the serial call's critical path: each replaces a dozen Python statements and
 * system-call wrappers (realpath, stat and access before the spawn; the reads, closes, killpg,
 * record store, waitpid and close at the exit) that ran while nothing else could.
 *
 * ongrid_entry_ok(path) is the fast form of SPEC §4's re-check: 1 when `path` is absolute and
 * normal (no empty, "." or ".." part), opens with openat2(RESOLVE_NO_SYMLINKS) (so no part of it
 * is a symlink: it is its own canonical path), is a regular file with an x bit, and passes
 * access(X_OK); 0 otherwise, for whatever reason (the caller then runs the full check, which
 * says why). Whether the path is under the skill's root is the caller's string comparison.
 *
 * ongrid_collect(pid, pidfd, out, err, cap, slot, timer, buf), for a call whose main process
 * exited:
 *   - reads what stdout (`out`) and stderr (`err`) hold without blocking: stdout into buf, at
 *     most `cap` bytes (<= COLLECT_MAX), stderr into buf + cap, at most COLLECT_MAX bytes; a
 *     descriptor < 0 is a pipe already at EOF;
 *   - closes each pipe that reached EOF (a read error counts as EOF, as on the Python path);
 *   - once both are at EOF, and only then: kill(-pid, SIGKILL) (what is left of the group),
 *     clears the call's group record slot (*slot = 0, unless NULL), reaps pid, closes the
 *     pidfd (unless -1) and disarms `timer`, the quiet-start timer the call armed (unless -1). The group id cannot have been reused before that kill: the leader is
 *     not reaped yet. The order is ChildCall.finish's (see child_call.py).
 *   - returns, packed in one integer (no array for ctypes to fill and read back): bits 0-19
 *     the stdout bytes read, 20-39 the stderr bytes read, 40 stdout at EOF, 41 stderr at EOF,
 *     42-43 reaped (0 no, 1 yes, 2 no such child to reap), 44-52 the return code in Popen's
 *     convention (negative = the signal), 9 bits two's complement.
 * A pipe left open (its buffer part full, or a descendant still holds it) is the caller's to
 * drain and watch; nothing is killed or reaped then.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437 /* the same number on every architecture */
#endif
#define ONGRID_RESOLVE_NO_SYMLINKS 0x04

struct ongrid_open_how {
    unsigned long long flags;
    unsigned long long mode;
    unsigned long long resolve;
};

/* "/a/b": absolute, every part non-empty and neither "." nor "..". */
static int normal_absolute(const char *p) {
    if (*p != '/') return 0;
    while (*p == '/') {
        const char *s = ++p;
        while (*p && *p != '/') p++;
        size_t n = (size_t)(p - s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
    }
    return 1;
}

int ongrid_entry_ok(const char *path) {
    if (!normal_absolute(path)) return 0;
    struct ongrid_open_how how;
    memset(&how, 0, sizeof how);
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = ONGRID_RESOLVE_NO_SYMLINKS;
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    if (fd < 0) return 0; /* a symlink on the way (ELOOP), gone, no openat2 (ENOSYS), ... */
    struct stat st;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
    close(fd);
    return ok && access(path, X_OK) == 0;
}

#define COLLECT_MAX 65536

/* ongrid_collect packs its answer in a long up to bit 52: a platform with a 32-bit long fails
   to build this library, and the runner uses its subprocess path there. */
_Static_assert(sizeof(long) == 8, "ongrid_collect needs a 64-bit long");

/* Reads `fd` into buf (at most cap bytes) until it would block; *eof = 1 at EOF (fd closed). */
static long drain(int fd, char *buf, long cap, long *eof) {
    long got = 0;
    *eof = fd < 0;
    if (fd < 0) return 0;
    while (got < cap) {
        ssize_t n = read(fd, buf + got, (size_t)(cap - got));
        if (n > 0) {
            got += n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            return got;
        } else { /* EOF, or an error the Python path would take for EOF too */
            close(fd);
            *eof = 1;
            return got;
        }
    }
    return got; /* full: the caller reads on */
}

int ongrid_arm_timer(int timer, long ns); /* spawn_helper.c */

long ongrid_collect(int pid, int pidfd, int out, int err, long cap, long *slot, int timer,
                    char *buf) {
    long out_eof, err_eof;
    if (cap < 0 || cap > COLLECT_MAX) cap = COLLECT_MAX;
    long got_out = drain(out, buf, cap, &out_eof);
    long got_err = drain(err, buf + cap, COLLECT_MAX, &err_eof);
    long packed = got_out | got_err << 20 | out_eof << 40 | err_eof << 41;
    if (!(out_eof && err_eof)) return packed;
    if (pid <= 1) { /* never kill(0) or kill(-1): not a child's pid */
        if (pidfd >= 0) close(pidfd);
        return packed | 2L << 42;
    }
    kill(-pid, SIGKILL);
    if (slot != NULL) __atomic_store_n(slot, 0, __ATOMIC_SEQ_CST);
    int status = 0;
    pid_t reaped;
    do {
        /* Called at its exit (its pidfd said so): it is there to reap. Were it not, it was
           just killed: the wait is that of its end. */
        reaped = waitpid(pid, &status, WNOHANG);
        if (reaped == 0) reaped = waitpid(pid, &status, 0);
    } while (reaped < 0 && errno == EINTR);
    if (pidfd >= 0) close(pidfd);
    if (timer >= 0) ongrid_arm_timer(timer, 0);
    if (reaped != pid) return packed | 2L << 42;
    long code = WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
    return packed | 1L << 42 | (code & 0x1ff) << 44;
}
