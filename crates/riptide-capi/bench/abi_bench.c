/* The ABI's cost per call: N puts, N gets (copying), N pinned gets and N gets of absent keys
 * through the C ABI, on one database in the directory given as argv[1]; prints ns per call.
 * examples/rust_bench.rs does the same through the Rust API; bench/run.sh runs both. */
#include "riptide.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void make_key(char *key, int i) { snprintf(key, 17, "key%013d", (i * 7919) % 1000003); }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: abi_bench DIR [N]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 200000;
    riptide_db_t *db = NULL;
    riptide_error_t *err = NULL;
    if (riptide_open(argv[1], NULL, &db, &err) != RIPTIDE_OK) {
        fprintf(stderr, "open: %s\n", riptide_error_message(err));
        return 1;
    }
    char key[17], value[100];
    memset(value, 'v', sizeof value);
    double start = now_ns();
    for (int i = 0; i < n; i++) {
        make_key(key, i);
        if (riptide_put(db, NULL, (const uint8_t *)key, 16, (const uint8_t *)value, sizeof value, &err)) return 1;
    }
    double put = (now_ns() - start) / n;
    start = now_ns();
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        make_key(key, i);
        uint8_t *got = NULL;
        size_t len = 0;
        if (riptide_get(db, NULL, (const uint8_t *)key, 16, &got, &len, &err) || !got) return 1;
        total += len;
        riptide_free(got);
    }
    double get = (now_ns() - start) / n;
    start = now_ns();
    for (int i = 0; i < n; i++) {
        make_key(key, i);
        riptide_pinnable_t *pin = NULL;
        if (riptide_get_pinned(db, NULL, (const uint8_t *)key, 16, &pin, &err) || !pin) return 1;
        size_t len = 0;
        riptide_pinnable_value(pin, &len);
        total += len;
        riptide_pinnable_release(pin);
    }
    double pinned = (now_ns() - start) / n;
    start = now_ns();
    for (int i = 0; i < n; i++) {
        make_key(key, i);
        key[0] = 'x'; /* absent */
        uint8_t *got = NULL;
        size_t len = 0;
        if (riptide_get(db, NULL, (const uint8_t *)key, 16, &got, &len, &err) || got) return 1;
    }
    double missing = (now_ns() - start) / n;
    if (total != (size_t)n * 2 * sizeof value) return 1;
    riptide_close(db, NULL);
    printf("c-abi  put %.0f ns/call  get %.0f ns/call  get_pinned %.0f ns/call  get(absent) %.0f ns/call  (n=%d)\n",
           put, get, pinned, missing, n);
    return 0;
}
