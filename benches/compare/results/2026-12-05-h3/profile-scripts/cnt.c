#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
#include <string.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
static unsigned long n_malloc, n_calloc, n_realloc, n_free, n_memalign;
void *malloc(size_t n) { __atomic_fetch_add(&n_malloc, 1, __ATOMIC_RELAXED); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { __atomic_fetch_add(&n_calloc, 1, __ATOMIC_RELAXED); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { __atomic_fetch_add(&n_realloc, 1, __ATOMIC_RELAXED); return __libc_realloc(p, n); }
void free(void *p) { if (p) __atomic_fetch_add(&n_free, 1, __ATOMIC_RELAXED); __libc_free(p); }
int posix_memalign(void **out, size_t al, size_t n) { __atomic_fetch_add(&n_memalign, 1, __ATOMIC_RELAXED); void *p = __libc_memalign(al, n); if (!p) return 12; *out = p; return 0; }
void *aligned_alloc(size_t al, size_t n) { __atomic_fetch_add(&n_memalign, 1, __ATOMIC_RELAXED); return __libc_memalign(al, n); }
void *memalign(size_t al, size_t n) { __atomic_fetch_add(&n_memalign, 1, __ATOMIC_RELAXED); return __libc_memalign(al, n); }
/* counters readable at any time from /proc/PID/mem via the symbol address; simpler: dump on demand */
static void dump(void) {
  char b[256]; const char *path = getenv("CNT_OUT"); if (!path) return;
  int fd = open(path, O_WRONLY|O_CREAT|O_APPEND, 0644); if (fd < 0) return;
  int l = snprintf(b, sizeof b, "malloc=%lu calloc=%lu realloc=%lu free=%lu memalign=%lu\n", n_malloc, n_calloc, n_realloc, n_free, n_memalign);
  write(fd, b, l); close(fd);
}
#include <pthread.h>
static void *poller(void *arg) { (void)arg; const char *t = getenv("CNT_TRIGGER"); if (!t) return 0;
  for (;;) { usleep(100000); if (access(t, F_OK) == 0) { unlink(t); dump(); } } }
__attribute__((constructor)) static void init(void) { pthread_t th; if (getenv("CNT_TRIGGER")) pthread_create(&th, 0, poller, 0); }
__attribute__((destructor)) static void fini(void) { dump(); }
