/* The spawn helper: one external-skill child started the way SPEC §4 wants, in one C call.
 *
 * Built on first use into a shared library, with call_helper.c, by
 * ongrid_skills.execution.spawner (with the system's cc, cached by the hash of both files) and
 * called through ctypes. It exists because Python 3.11's os.posix_spawn cannot set the child's
 * cwd, and subprocess.Popen, which can, costs about twice the parent CPU of a posix_spawn.
 *
 * ongrid_spawn(path, cwd, env, nenv, payload, len, epfd, flags, timer, quiet_ns, out) does, for
 * argv = [path]:
 *   - with flags & SPAWN_CHECK_ENTRY, first the entry re-check of call_helper.c's
 *     ongrid_entry_ok: when it does not pass, nothing else is done and -1 is returned (the
 *     caller runs the full check, which says why);
 *   - three pipes (O_CLOEXEC); the parent's ends are made non-blocking (stdin only when the
 *     payload is longer than PIPE_BUF: shorter, it is written at once and closed);
 *   - the child (see "the child" below): a new session (so a new process group too), an empty
 *     signal mask, SIGPIPE and SIGXFSZ back to their default action (Python ignores them;
 *     subprocess restores them too), stdin/stdout/stderr on the pipes, cwd = `cwd`, every
 *     other descriptor closed, environment = exactly the `nenv` NUL-ended "NAME=value"
 *     strings packed in `env`;
 *   - a pidfd on the child, when the kernel has pidfd_open (else -1);
 *   - as much of `payload` written to stdin as the pipe takes without blocking, and stdin
 *     closed when all of it was (or the child will never read it: EPIPE);
 *   - when `epfd` >= 0, stdout, stderr and the pidfd added to that epoll (EPOLLIN, data = fd);
 *     with flags & SPAWN_WATCH_PIDFD, the pidfd alone (a quiet start: see child_call.py), and
 *     then, when `timer` >= 0, that timerfd (ongrid_quiet_timer) armed `quiet_ns` from now
 *     (the end of the quiet start, without a timer of the event loop's);
 *   - out = {pid, stdin (write end, or -1 once closed), stdout (read end), stderr (read end),
 *     pidfd, bytes of payload written, what was added to epfd: 0 nothing, 1 the three
 *     descriptors, 2 the pidfd alone, 3 the pidfd alone and the timer armed}.
 * It returns 0, or the errno of what failed (nothing is left open or running then). What it
 * does after the spawn cannot fail the call: the runner redoes what was not done.
 *
 * What must never happen here: allocating, taking a lock or running a handler of the manager
 * in the child (it runs in the manager's memory until it execs), or leaving a descriptor of
 * the manager open in it. Linux only (clone, pidfds, close_range); elsewhere the runner uses
 * Python's subprocess.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define ONGRID_SPAWN_ABI 4
#define SPAWN_CHECK_ENTRY 1
#define SPAWN_WATCH_PIDFD 2

int ongrid_entry_ok(const char *path); /* call_helper.c */

int ongrid_spawn_abi(void) { return ONGRID_SPAWN_ABI; }

/* A timerfd for a runner's quiet starts (non-blocking, close-on-exec), or -errno. */
int ongrid_quiet_timer(void) {
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* Arms `timer` once, `ns` from now (0: disarms it); 1 on success. */
int ongrid_arm_timer(int timer, long ns) {
    struct itimerspec when;
    memset(&when, 0, sizeof when);
    when.it_value.tv_sec = ns / 1000000000L;
    when.it_value.tv_nsec = ns % 1000000000L;
    return timerfd_settime(timer, 0, &when, NULL) == 0;
}

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

static pid_t clone_spawn(const char *path, const char *cwd, char **envp, const int *fds,
                         const long *conf, int *rc);

static int spawn_any(const char *path, const char *cwd, const char *env, int nenv,
                     const char *payload, long len, int epfd, int flags, int timer,
                     long quiet_ns, long *out, const long *conf) {
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

    pid_t pid = clone_spawn(path, cwd, envp, fds, conf, &rc);
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
        out[6] = timer >= 0 && quiet_ns > 0 && ongrid_arm_timer(timer, quiet_ns) ? 3 : 2;
    return 0;
}

int ongrid_spawn(const char *path, const char *cwd, const char *env, int nenv,
                 const char *payload, long len, int epfd, int flags, int timer, long quiet_ns,
                 long *out) {
    return spawn_any(path, cwd, env, nenv, payload, len, epfd, flags, timer, quiet_ns, out,
                     NULL);
}

/* ---- the child ----------------------------------------------------------------------------
 *
 * The child is cloned the way glibc's posix_spawn clones it: CLONE_VM | CLONE_VFORK on a stack
 * of its own (one per thread, kept for its next spawn), every signal blocked in the parent
 * around the clone, and an error of the child (before or at exec) written back through the
 * shared memory. The child does, in order: setsid, the three dup2, chdir, the confinement when
 * asked (below), close every descriptor from 3 up, the signal mask, execve; the signal
 * dispositions are reset before the confinement.
 *
 * Why not posix_spawn: until it execs, the child runs in the manager's memory with copies of the
 * manager's signal handlers, which must not run there, so each is reset to the default before
 * the mask is emptied. glibc asks the kernel for the handler of each of the 64 signals, one
 * system call each (some 120 in all, while the manager waits); here one read of the child's
 * own /proc/self/status (SigCgt: the signals it has a handler for) says which to reset, and
 * only when /proc cannot say is each one asked.
 *
 * ongrid_spawn_confined(..., conf) is ongrid_spawn with the child confined before it execs
 * (the runner checks a confined call's entry itself: it needs the canonical path first):
 *   conf[0]  a Landlock ruleset descriptor (built by the parent, O_CLOEXEC), or -1;
 *   conf[1]  flags: 1 = no_new_privs, 2 = new PID namespace whose pid_max is conf[2],
 *            4 = drop every capability (bounding set, then the process's sets: root's
 *            child execs without any);
 *   conf[2]  that pid_max (the kernel's floor is 301);
 *   conf[3]  n, then n pairs (resource, limit) for setrlimit (soft = hard = limit).
 * In the child, after the signal dispositions: pid_max (in its new namespace), the rlimits,
 * the capabilities, PR_SET_NO_NEW_PRIVS, landlock_restrict_self. Any step that fails fails
 * the spawn: never a child less confined than asked. */

#define CONF_NO_NEW_PRIVS 1
#define CONF_NEW_PIDNS 2
#define CONF_DROP_CAPS 4
#define CHILD_STACK (256 * 1024)

struct child_args {
    const char *path;
    const char *cwd;
    char **envp;
    const int *fds;
    const long *conf; /* NULL: not confined */
    char pid_max[24];
    int err;
};

/* The signals this process has a handler for, from SigCgt in /proc/self/status: 1, or 0 when
 * it cannot be read. No allocation, no lock: it runs in the cloned child. */
static int caught_signals(unsigned long long *caught) {
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    const char *p = strstr(buf, "\nSigCgt:\t");
    if (p == NULL) return 0;
    unsigned long long mask = 0;
    int digits = 0;
    for (p += 9; digits < 16; p++, digits++) {
        int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (v < 0) break;
        mask = mask << 4 | (unsigned long long)v;
    }
    if (digits == 0 || *p != '\n') return 0;
    *caught = mask;
    return 1;
}

static int has_handler(int sig, int known, unsigned long long caught) {
    if (known) return sig <= 64 && (caught >> (sig - 1) & 1);
    struct sigaction sa;
    if (sigaction(sig, NULL, &sa) != 0) return 0; /* the C library's own signals */
    return sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN;
}

/* Every handled signal back to its default (the manager's handlers must not run in the child),
 * and SIGPIPE and SIGXFSZ too; other ignored signals stay ignored, as exec leaves them. */
static void reset_signals(void) {
    unsigned long long caught = 0;
    int known = caught_signals(&caught);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig == SIGPIPE || sig == SIGXFSZ || has_handler(sig, known, caught))
            sigaction(sig, &dfl, NULL); /* refused for the C library's own: they stay */
}

/* Closes every descriptor from 3 up: close_range, or one by one where it fails (no such call
   in the kernel, or a seccomp policy that refuses it with EPERM, as older container profiles
   do: closing is harmless whatever the reason). */
static int close_from_3(void) {
    if (syscall(SYS_close_range, 3, ~0U, 0) == 0) return 0;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    for (rlim_t fd = 3; fd < rl.rlim_cur && fd < (1U << 20); fd++) close((int)fd);
    return 0;
}

static int confine(struct child_args *a) {
    const long *conf = a->conf;
    if (conf[1] & CONF_NEW_PIDNS) {
        int fd = open("/proc/sys/kernel/pid_max", O_WRONLY | O_CLOEXEC);
        if (fd < 0) return -1;
        ssize_t want = (ssize_t)strlen(a->pid_max);
        ssize_t done = write(fd, a->pid_max, (size_t)want);
        int saved = errno;
        close(fd);
        if (done != want) {
            errno = done < 0 ? saved : EIO;
            return -1;
        }
    }
    for (long i = 0; i < conf[3]; i++) {
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = (rlim_t)conf[5 + 2 * i];
        if (setrlimit((int)conf[4 + 2 * i], &rl) != 0) return -1;
    }
    if (conf[1] & CONF_DROP_CAPS) {
        for (int cap = 0; cap < 64; cap++)
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return -1;
        struct {
            unsigned int version;
            int pid;
        } header = {0x20080522, 0}; /* _LINUX_CAPABILITY_VERSION_3 */
        unsigned int data[6] = {0, 0, 0, 0, 0, 0};
        if (syscall(SYS_capset, &header, data) != 0) return -1;
    }
    if ((conf[1] & CONF_NO_NEW_PRIVS) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    if (conf[0] >= 0 && syscall(SYS_landlock_restrict_self, (int)conf[0], 0) != 0) return -1;
    return 0;
}

static int child_main(void *raw) {
    struct child_args *a = raw;
    char *argv[2] = {(char *)a->path, NULL};
    if (setsid() < 0) goto fail;
    if (dup2(a->fds[0], 0) < 0 || dup2(a->fds[3], 1) < 0 || dup2(a->fds[5], 2) < 0) goto fail;
    if (chdir(a->cwd) < 0) goto fail;
    reset_signals(); /* before Landlock, which may deny it /proc */
    if (a->conf != NULL && confine(a) != 0) goto fail;
    if (close_from_3() != 0) goto fail;
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(a->path, argv, a->envp);
fail:
    a->err = errno ? errno : EINVAL;
    _exit(127);
}

/* This thread's child stack: made on its first spawn, kept for the next (the child is done with
 * it once the clone returns), unmapped when the thread exits. */
static pthread_key_t stack_key;
static pthread_once_t stack_once = PTHREAD_ONCE_INIT;

static void free_stack(void *stack) { munmap(stack, CHILD_STACK); }
static void make_stack_key(void) { pthread_key_create(&stack_key, free_stack); }

static char *thread_stack(void) {
    pthread_once(&stack_once, make_stack_key);
    char *stack = pthread_getspecific(stack_key);
    if (stack != NULL) return stack;
    stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return NULL;
    if (pthread_setspecific(stack_key, stack) != 0) {
        munmap(stack, CHILD_STACK);
        return NULL;
    }
    return stack;
}

static pid_t clone_spawn(const char *path, const char *cwd, char **envp, const int *fds,
                         const long *conf, int *rc) {
    struct child_args args;
    memset(&args, 0, sizeof args);
    args.path = path;
    args.cwd = cwd;
    args.envp = envp;
    args.fds = fds;
    args.conf = conf;
    if (conf != NULL && (conf[1] & CONF_NEW_PIDNS)) {
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
    char *stack = thread_stack();
    if (stack == NULL) {
        *rc = ENOMEM;
        return -1;
    }
    int flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
    if (conf != NULL && (conf[1] & CONF_NEW_PIDNS)) flags |= CLONE_NEWPID;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = clone(child_main, stack + CHILD_STACK, flags, &args);
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        *rc = saved;
        return -1;
    }
    if (args.err != 0) { /* it failed before or at exec: it has exited */
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        *rc = args.err;
        return -1;
    }
    *rc = 0;
    return pid;
}

int ongrid_spawn_confined(const char *path, const char *cwd, const char *env, int nenv,
                          const char *payload, long len, int epfd, int flags, int timer,
                          long quiet_ns, long *out, const long *conf) {
    if (conf == NULL) return EINVAL;
    return spawn_any(path, cwd, env, nenv, payload, len, epfd, flags, timer, quiet_ns, out,
                     conf);
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
