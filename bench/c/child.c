/* A trivial external skill for the benchmarks.
 *
 * Reads stdin to EOF, writes a small JSON object (~44 bytes) on stdout and exits 0.
 * The environment variable CHILD_MODE (absent in the floor and throughput benches) selects a
 * misbehaviour for the leak bench:
 *   fail  - one line on stderr, nothing on stdout, exit status 3
 *   sleep - sleep 60 s (to be killed by the runner's timeout)
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char OUT[] = "{\"ok\":true,\"n\":1,\"msg\":\"hello from c child\"}\n";
static const char ERR[] = "c child: failing on purpose\n";

static void write_all(int fd, const char *p, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w <= 0) return;
        p += w;
        len -= (size_t)w;
    }
}

int main(void) {
    char buf[65536];
    for (;;) {
        ssize_t r = read(0, buf, sizeof buf);
        if (r <= 0) break;
    }
    const char *mode = getenv("CHILD_MODE");
    if (mode != NULL && strcmp(mode, "fail") == 0) {
        write_all(2, ERR, sizeof ERR - 1);
        return 3;
    }
    if (mode != NULL && strcmp(mode, "sleep") == 0) {
        sleep(60);
    }
    write_all(1, OUT, sizeof OUT - 1);
    return 0;
}
