/* The spawn helper: one external-skill child started the way SPEC §4 wants, in one C call.
 *
 * Built on first use into a shared library, with call_helper.c, by
 * ongrid_skills.execution.spawner (with the system's cc, cached by the hash of both files) and
 * called through ctypes. It exists because
 * Python 3.11's os.posix_spawn cannot set the child's cwd, and subprocess.Popen, which can,
 * costs about twice the parent CPU of a posix_spawn.
 *
 * ongrid_spawn(path, cwd, env, nenv, payload, len, epfd, flags, out) does, for argv = [path]:
 *   - with flags & SPAWN_CHECK_ENTRY, first the entry re-check of call_helper.c's
 *     ongrid_entry_ok: when it does not pass, nothing else is done and -1 is returned (the
 *     caller runs the full check, which says why);
 *   - three pipes (O_CLOEXEC); the parent's ends are made non-blocking (stdin only when the
 *     payload is longer than PIPE_BUF: shorter, it is written at once and closed);
 *   - posix_spawn with, in the child: a new session (POSIX_SPAWN_SETSID, so a new process
 *     group too), an empty signal mask, SIGPIPE and SIGXFSZ back to their default action
 *     (Python ignores them; subprocess restores them too), stdin/stdout/stderr on the pipes,
 *     cwd = `cwd`, every other descriptor closed, environment = exactly the `nenv` NUL-ended
 *     "NAME=value" strings packed in `env`;
 *   - a pidfd on the child, when the kernel has pidfd_open (else -1);
 *   - as much of `payload` written to stdin as the pipe takes without blocking, and stdin
 *     closed when all of it was (or the child will never read it: EPIPE);
 *   - when `epfd` >= 0, stdout, stderr and the pidfd added to that epoll (EPOLLIN, data = fd);
 *     with flags & SPAWN_WATCH_PIDFD, the pidfd alone (a quiet start: see child_call.py);
 *   - out = {pid, stdin (write end, or -1 once closed), stdout (read end), stderr (read end),
 *     pidfd, bytes of payload written, what was added to epfd: 0 nothing, 1 the three
 *     descriptors, 2 the pidfd alone}.
 * It returns 0, or the errno of what failed (nothing is left open or running then). What it
 * does after the spawn cannot fail the call: the runner redoes what was not done.
 *
 * glibc's posix_spawn runs the child on a separate stack with CLONE_VM | CLONE_VFORK, blocks
 * every signal around it and resets the handled ones in the child, and reports a failed exec
 * as its return value: the careful parts are the C library's. What must never happen here:
 * allocating or calling anything but posix_spawn's own actions in the child, or leaving a
 * descriptor of the manager open in it. Needs glibc >= 2.34 (addclosefrom_np) or a libc with
 * the same three extensions; elsewhere the compile fails and Python's subprocess is used.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef POSIX_SPAWN_SETSID
#error "posix_spawn cannot start a new session here"
#endif

#define ONGRID_SPAWN_ABI 4
#define SPAWN_CHECK_ENTRY 1
#define SPAWN_WATCH_PIDFD 2

int ongrid_entry_ok(const char *path); /* call_helper.c */

int ongrid_spawn_abi(void) { return ONGRID_SPAWN_ABI; }

/* A descriptor the child receives must not sit on 0-2: the dup2 actions would overwrite one
 * with another (the manager runs with a standard stream closed). Moves `*fd` to >= 3. */
static int above_std(int *fd) {
    if (*fd > 2) return 0;
    int moved = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
    if (moved < 0) return errno;
    close(*fd);
    *fd = moved;
    return 0;
}

static void close_all(int *fds, int n) {
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]);
}

/* Writes what the pipe takes now; closes `*fd` when done or when the reader is gone. */
static long feed(int *fd, const char *payload, long len) {
    long done = 0;
    while (done < len) {
        ssize_t n = write(*fd, payload + done, (size_t)(len - done));
        if (n > 0) {
            done += n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            return done;
        } else { /* EPIPE: the child does not read stdin; that is its right */
            break;
        }
    }
    close(*fd);
    *fd = -1;
    return done;
}

/* Adds the `n` descriptors to `epfd`; all or none. */
static int watch(int epfd, const int *fds, int n) {
    for (int i = 0; i < n; i++) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN;
        ev.data.fd = fds[i];
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, fds[i], &ev) != 0) {
            while (i-- > 0) epoll_ctl(epfd, EPOLL_CTL_DEL, fds[i], NULL);
            return 0;
        }
    }
    return 1;
}

static pid_t confined_spawn(const char *path, const char *cwd, char **envp, const int *fds,
                            const long *conf, int *rc);

/* The file actions of this thread's last spawn, kept for the next one with the same three
 * descriptors and cwd (a serial caller gets the same descriptor numbers every time): building
 * them costs seven getrlimit calls in glibc, which checks every descriptor it is given. */
static __thread struct {
    int valid, in, out, err;
    char *cwd;
    posix_spawn_file_actions_t fa;
} kept;

static int file_actions(const int *fds, const char *cwd, posix_spawn_file_actions_t **found) {
    if (kept.valid && kept.in == fds[0] && kept.out == fds[3] && kept.err == fds[5] &&
        strcmp(kept.cwd, cwd) == 0) {
        *found = &kept.fa;
        return 0;
    }
    if (kept.valid) {
        posix_spawn_file_actions_destroy(&kept.fa);
        free(kept.cwd);
        kept.valid = 0;
    }
    kept.cwd = strdup(cwd);
    if (kept.cwd == NULL) return ENOMEM;
    int rc = posix_spawn_file_actions_init(&kept.fa);
    if (rc != 0) {
        free(kept.cwd);
        return rc;
    }
    if (!rc) rc = posix_spawn_file_actions_adddup2(&kept.fa, fds[0], 0);
    if (!rc) rc = posix_spawn_file_actions_adddup2(&kept.fa, fds[3], 1);
    if (!rc) rc = posix_spawn_file_actions_adddup2(&kept.fa, fds[5], 2);
    if (!rc) rc = posix_spawn_file_actions_addchdir_np(&kept.fa, cwd);
    if (!rc) rc = posix_spawn_file_actions_addclosefrom_np(&kept.fa, 3);
    if (rc != 0) {
        posix_spawn_file_actions_destroy(&kept.fa);
        free(kept.cwd);
        return rc;
    }
    kept.in = fds[0];
    kept.out = fds[3];
    kept.err = fds[5];
    kept.valid = 1;
    *found = &kept.fa;
    return 0;
}

static int spawn_any(const char *path, const char *cwd, const char *env, int nenv,
                     const char *payload, long len, int epfd, int flags, long *out,
                     const long *conf) {
    int fds[6] = {-1, -1, -1, -1, -1, -1}; /* in_r, in_w, out_r, out_w, err_r, err_w */
    int rc = 0;
    char **envp = NULL;
    if (nenv < 0) return EINVAL;
    if ((flags & SPAWN_CHECK_ENTRY) && !ongrid_entry_ok(path)) return -1;
    if (pipe2(fds, O_CLOEXEC) || pipe2(fds + 2, O_CLOEXEC) || pipe2(fds + 4, O_CLOEXEC)) {
        rc = errno;
        close_all(fds, 6);
        return rc;
    }
    if ((rc = above_std(&fds[0])) || (rc = above_std(&fds[3])) || (rc = above_std(&fds[5]))) {
        close_all(fds, 6);
        return rc;
    }
    envp = malloc(sizeof(char *) * ((size_t)nenv + 1));
    if (envp == NULL) {
        close_all(fds, 6);
        return ENOMEM;
    }
    const char *p = env;
    for (int i = 0; i < nenv; i++) {
        envp[i] = (char *)p;
        p += strlen(p) + 1;
    }
    envp[nenv] = NULL;

    pid_t pid = -1;
    if (conf != NULL) {
        pid = confined_spawn(path, cwd, envp, fds, conf, &rc);
        goto spawned;
    }
    posix_spawn_file_actions_t *fa = NULL;
    posix_spawnattr_t attr;
    sigset_t none, dflt;
    sigemptyset(&none);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigaddset(&dflt, SIGXFSZ);
    if ((rc = file_actions(fds, cwd, &fa)) != 0) {
        free(envp);
        close_all(fds, 6);
        return rc;
    }
    if ((rc = posix_spawnattr_init(&attr)) != 0) {
        free(envp);
        close_all(fds, 6);
        return rc;
    }
    if (!rc)
        rc = posix_spawnattr_setflags(
            &attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (!rc) rc = posix_spawnattr_setsigmask(&attr, &none);
    if (!rc) rc = posix_spawnattr_setsigdefault(&attr, &dflt);
    char *argv[2] = {(char *)path, NULL};
    if (!rc) rc = posix_spawn(&pid, path, fa, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
spawned:
    free(envp);
    /* The child's ends are the child's now (or nobody's): close them either way. */
    close(fds[0]);
    close(fds[3]);
    close(fds[5]);
    if (rc != 0) {
        close(fds[1]);
        close(fds[2]);
        close(fds[4]);
        return rc;
    }
    /* stdin stays blocking when the payload fits a pipe's atomic write (PIPE_BUF: every pipe
     * holds that much, so the write returns at once and stdin is closed here) */
    if (len > PIPE_BUF) fcntl(fds[1], F_SETFL, O_NONBLOCK);
    fcntl(fds[2], F_SETFL, O_NONBLOCK);
    fcntl(fds[4], F_SETFL, O_NONBLOCK);
    int pidfd = -1;
#ifdef SYS_pidfd_open
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0); /* close-on-exec by definition */
    if (pidfd < 0) pidfd = -1;
#endif
    int in_w = fds[1];
    long written = feed(&in_w, payload, len);
    int watched[3] = {fds[2], fds[4], pidfd};
    out[0] = pid;
    out[1] = in_w;
    out[2] = fds[2];
    out[3] = fds[4];
    out[4] = pidfd;
    out[5] = written;
    out[6] = 0;
    if (epfd >= 0 && !(flags & SPAWN_WATCH_PIDFD))
        out[6] = watch(epfd, watched, pidfd >= 0 ? 3 : 2);
    else if (epfd >= 0 && pidfd >= 0 && watch(epfd, &pidfd, 1))
        out[6] = 2;
    return 0;
}

int ongrid_spawn(const char *path, const char *cwd, const char *env, int nenv,
                 const char *payload, long len, int epfd, int flags, long *out) {
    return spawn_any(path, cwd, env, nenv, payload, len, epfd, flags, out, NULL);
}

/* ---- confined spawn (sandbox profiles, docs/security.md) ----------------------------------
 *
 * ongrid_spawn_confined(..., conf) is ongrid_spawn with the child confined before it execs
 * (the runner checks a confined call's entry itself: it needs the canonical path first):
 *   conf[0]  a Landlock ruleset descriptor (built by the parent, O_CLOEXEC), or -1;
 *   conf[1]  flags: 1 = no_new_privs, 2 = new PID namespace whose pid_max is conf[2],
 *            4 = drop every capability (bounding set, then the process's sets: root's
 *            child execs without any);
 *   conf[2]  that pid_max (the kernel's floor is 301);
 *   conf[3]  n, then n pairs (resource, limit) for setrlimit (soft = hard = limit).
 * posix_spawn cannot run code in the child, so this path clones the child itself the way glibc
 * does: CLONE_VM | CLONE_VFORK on a stack of its own, every signal blocked in the parent
 * around it, handled signals reset to their default in the child, and an error of the child
 * (before or at exec) written back through the shared memory. The child does, in order:
 * setsid, the three dup2, chdir, pid_max (in its new namespace), the rlimits, the
 * capabilities, PR_SET_NO_NEW_PRIVS, landlock_restrict_self, close every descriptor from 3 up, the signal
 * mask and dispositions, execve. Any step that fails fails the spawn: never a child less
 * confined than asked. */

#define CONF_NO_NEW_PRIVS 1
#define CONF_NEW_PIDNS 2
#define CONF_DROP_CAPS 4
#define CHILD_STACK (256 * 1024)

struct child_args {
    const char *path;
    const char *cwd;
    char **envp;
    const int *fds;
    const long *conf;
    char pid_max[24];
    int err;
};

static int child_main(void *raw) {
    struct child_args *a = raw;
    const long *conf = a->conf;
    char *argv[2] = {(char *)a->path, NULL};
    if (setsid() < 0) goto fail;
    if (dup2(a->fds[0], 0) < 0 || dup2(a->fds[3], 1) < 0 || dup2(a->fds[5], 2) < 0) goto fail;
    if (chdir(a->cwd) < 0) goto fail;
    if (conf[1] & CONF_NEW_PIDNS) {
        int fd = open("/proc/sys/kernel/pid_max", O_WRONLY | O_CLOEXEC);
        if (fd < 0) goto fail;
        ssize_t want = (ssize_t)strlen(a->pid_max);
        ssize_t done = write(fd, a->pid_max, (size_t)want);
        int saved = errno;
        close(fd);
        if (done != want) {
            errno = done < 0 ? saved : EIO;
            goto fail;
        }
    }
    for (long i = 0; i < conf[3]; i++) {
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = (rlim_t)conf[5 + 2 * i];
        if (setrlimit((int)conf[4 + 2 * i], &rl) != 0) goto fail;
    }
    if (conf[1] & CONF_DROP_CAPS) {
        for (int cap = 0; cap < 64; cap++)
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) goto fail;
        struct {
            unsigned int version;
            int pid;
        } header = {0x20080522, 0}; /* _LINUX_CAPABILITY_VERSION_3 */
        unsigned int data[6] = {0, 0, 0, 0, 0, 0};
        if (syscall(SYS_capset, &header, data) != 0) goto fail;
    }
    if ((conf[1] & CONF_NO_NEW_PRIVS) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) goto fail;
    if (conf[0] >= 0 && syscall(SYS_landlock_restrict_self, (int)conf[0], 0) != 0) goto fail;
    if (syscall(SYS_close_range, 3, ~0U, 0) != 0) goto fail;
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sigaction(sig, NULL, &sa) != 0) continue; /* the C library's own signals */
        if (sa.sa_handler == SIG_DFL) continue;
        if (sa.sa_handler == SIG_IGN && sig != SIGPIPE && sig != SIGXFSZ) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigaction(sig, &sa, NULL);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(a->path, argv, a->envp);
fail:
    a->err = errno ? errno : EINVAL;
    _exit(127);
}

static pid_t confined_spawn(const char *path, const char *cwd, char **envp, const int *fds,
                            const long *conf, int *rc) {
    struct child_args args;
    memset(&args, 0, sizeof args);
    args.path = path;
    args.cwd = cwd;
    args.envp = envp;
    args.fds = fds;
    args.conf = conf;
    if (conf[1] & CONF_NEW_PIDNS) {
        long v = conf[2];
        char tmp[24];
        int n = 0;
        do {
            tmp[n++] = (char)('0' + v % 10);
            v /= 10;
        } while (v > 0 && n < 20);
        for (int i = 0; i < n; i++) args.pid_max[i] = tmp[n - 1 - i];
        args.pid_max[n] = 0;
    }
    char *stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        *rc = errno;
        return -1;
    }
    int flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
    if (conf[1] & CONF_NEW_PIDNS) flags |= CLONE_NEWPID;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = clone(child_main, stack + CHILD_STACK, flags, &args);
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    munmap(stack, CHILD_STACK);
    if (pid < 0) {
        *rc = saved;
        return -1;
    }
    if (args.err != 0) { /* it failed before or at exec: it has exited */
        waitpid(pid, NULL, 0);
        *rc = args.err;
        return -1;
    }
    *rc = 0;
    return pid;
}

int ongrid_spawn_confined(const char *path, const char *cwd, const char *env, int nenv,
                          const char *payload, long len, int epfd, int flags, long *out,
                          const long *conf) {
    if (conf == NULL) return EINVAL;
    return spawn_any(path, cwd, env, nenv, payload, len, epfd, flags, out, conf);
}

/* ---- Landlock rulesets --------------------------------------------------------------------
 *
 * ongrid_landlock_ruleset(attr, size, rules, n): landlock_create_ruleset with the `size` bytes
 * of `attr`, then one path-beneath rule per pair (O_PATH descriptor, allowed rights) of
 * `rules`; returns the ruleset descriptor (close-on-exec), or -errno. One call from Python
 * instead of one per rule. */

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#endif

struct path_beneath {
    unsigned long long allowed;
    int parent_fd;
} __attribute__((packed));

int ongrid_landlock_ruleset(const void *attr, long size, const long *rules, int n) {
    int fd = (int)syscall(SYS_landlock_create_ruleset, attr, (size_t)size, 0);
    if (fd < 0) return -errno;
    for (int i = 0; i < n; i++) {
        struct path_beneath rule;
        rule.allowed = (unsigned long long)rules[2 * i + 1];
        rule.parent_fd = (int)rules[2 * i];
        if (syscall(SYS_landlock_add_rule, fd, 1, &rule, 0) != 0) {
            int saved = errno;
            close(fd);
            return -saved;
        }
    }
    return fd;
}
