/* The physical floor of one external-skill call, for the runner benchmarks.
 *
 *   floor [-p PARENTS] [-C DIR] N CHILD PAYLOAD
 *
 * Does N times: posix_spawn CHILD (argv = [CHILD], empty environment, new process group,
 * optional cwd DIR) with stdin/stdout/stderr on three pipes, writes PAYLOAD to stdin and closes
 * it, drains stdout and stderr to EOF with poll(2), then waitpid. With -p P > 1 it forks P
 * parents, each doing N/P calls, and reports the aggregate throughput over the wall time.
 * Prints one JSON object on stdout; in serial mode it includes the parent's own CPU time per
 * call (parent_cpu_us), the cost of the spawning side alone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *g_child;
static const char *g_payload;
static size_t g_payload_len;
static const char *g_cwd;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what, int err) {
    fprintf(stderr, "floor: %s: %s\n", what, strerror(err));
    exit(2);
}

/* One call. Returns the number of stdout bytes read (must be > 0). */
static long one_call(void) {
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
        die("pipe2", errno);

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 29))
    if (g_cwd != NULL) posix_spawn_file_actions_addchdir_np(&fa, g_cwd);
#endif
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);

    char *argv[] = {(char *)g_child, NULL};
    char *envp[] = {NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, g_child, &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) die("posix_spawn", rc);
    close(in[0]);
    close(out[1]);
    close(err[1]);

    struct pollfd pfd[3] = {
        {.fd = in[1], .events = POLLOUT},
        {.fd = out[0], .events = POLLIN},
        {.fd = err[0], .events = POLLIN},
    };
    size_t written = 0;
    long got = 0;
    int open_fds = 3;
    if (g_payload_len == 0) {
        close(in[1]);
        pfd[0].fd = -1;
        open_fds--;
    }
    char buf[65536];
    while (open_fds > 0) {
        if (poll(pfd, 3, -1) < 0) {
            if (errno == EINTR) continue;
            die("poll", errno);
        }
        if (pfd[0].fd >= 0 && pfd[0].revents) {
            ssize_t w = 0;
            if (pfd[0].revents & POLLOUT)
                w = write(in[1], g_payload + written, g_payload_len - written);
            if (w > 0) written += (size_t)w;
            if (w < 0 || written == g_payload_len || (pfd[0].revents & (POLLERR | POLLHUP))) {
                close(in[1]);
                pfd[0].fd = -1;
                open_fds--;
            }
        }
        for (int i = 1; i < 3; i++) {
            if (pfd[i].fd < 0 || !pfd[i].revents) continue;
            ssize_t r = read(pfd[i].fd, buf, sizeof buf);
            if (r > 0) {
                if (i == 1) got += r;
            } else if (r == 0 || errno != EINTR) {
                close(pfd[i].fd);
                pfd[i].fd = -1;
                open_fds--;
            }
        }
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) die("waitpid", errno);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "floor: child failed (status %d)\n", status);
        exit(2);
    }
    return got;
}

/* CPU time (user + system) this process has used itself, in µs. */
static double self_cpu_us(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *sorted, long n, double q) {
    long i = (long)(q * (double)(n - 1) + 0.5);
    return sorted[i];
}

static void serial(long n) {
    double *t = malloc(sizeof(double) * (size_t)n);
    if (t == NULL) die("malloc", errno);
    double sum = 0;
    double cpu0 = self_cpu_us();
    double start = now_us();
    for (long i = 0; i < n; i++) {
        double t0 = now_us();
        if (one_call() <= 0) {
            fprintf(stderr, "floor: empty stdout\n");
            exit(2);
        }
        t[i] = now_us() - t0;
        sum += t[i];
    }
    double wall = now_us() - start;
    double cpu = self_cpu_us() - cpu0;
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    printf("{\"mode\":\"serial\",\"parents\":1,\"calls\":%ld,\"p50_us\":%.1f,\"p90_us\":%.1f,"
           "\"p99_us\":%.1f,\"min_us\":%.1f,\"mean_us\":%.1f,\"wall_s\":%.4f,"
           "\"calls_per_s\":%.1f,\"parent_cpu_us\":%.1f}\n",
           n, pct(t, n, 0.5), pct(t, n, 0.9), pct(t, n, 0.99), t[0], sum / (double)n,
           wall / 1e6, (double)n / (wall / 1e6), cpu / (double)n);
    free(t);
}

static void parallel(long n, int parents) {
    long per = n / parents;
    double start = now_us();
    for (int p = 0; p < parents; p++) {
        pid_t pid = fork();
        if (pid < 0) die("fork", errno);
        if (pid == 0) {
            for (long i = 0; i < per; i++) one_call();
            _exit(0);
        }
    }
    int failed = 0;
    for (int p = 0; p < parents; p++) {
        int status;
        if (wait(&status) < 0) die("wait", errno);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    }
    double wall = now_us() - start;
    if (failed) {
        fprintf(stderr, "floor: a parent failed\n");
        exit(2);
    }
    long total = per * parents;
    printf("{\"mode\":\"parallel\",\"parents\":%d,\"calls\":%ld,\"wall_s\":%.4f,"
           "\"mean_us\":%.1f,\"calls_per_s\":%.1f}\n",
           parents, total, wall / 1e6, wall * parents / (double)total,
           (double)total / (wall / 1e6));
}

int main(int argc, char **argv) {
    int parents = 1;
    int opt;
    while ((opt = getopt(argc, argv, "p:C:")) != -1) {
        if (opt == 'p') parents = atoi(optarg);
        else if (opt == 'C') g_cwd = optarg;
        else {
            fprintf(stderr, "usage: floor [-p PARENTS] [-C DIR] N CHILD PAYLOAD\n");
            return 2;
        }
    }
    if (argc - optind != 3 || parents < 1) {
        fprintf(stderr, "usage: floor [-p PARENTS] [-C DIR] N CHILD PAYLOAD\n");
        return 2;
    }
    long n = atol(argv[optind]);
    if (n < parents) n = parents;
    g_child = argv[optind + 1];
    g_payload = argv[optind + 2];
    g_payload_len = strlen(g_payload);
    if (parents == 1) serial(n);
    else parallel(n, parents);
    return 0;
}
