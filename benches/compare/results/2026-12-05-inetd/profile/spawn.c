#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <time.h>
// spawn N req dir prog args...: run prog N times, stdin=req, stdout=/dev/null, cwd=dir
int main(int argc, char **argv) {
  int n = atoi(argv[1]); const char *req = argv[2]; const char *dir = argv[3];
  double cpu = 0; long flt = 0; struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < n; i++) {
    pid_t p = fork();
    if (p == 0) {
      int fd = open(req, O_RDONLY); dup2(fd, 0); close(fd);
      fd = open("/dev/null", O_WRONLY); dup2(fd, 1); dup2(fd, 2); close(fd);
      if (chdir(dir)) _exit(126);
      execv(argv[4], argv + 4); _exit(127);
    }
    int st; struct rusage ru; wait4(p, &st, 0, &ru);
    if (!WIFEXITED(st)) { fprintf(stderr, "child died\n"); }
    cpu += ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
    flt += ru.ru_minflt + ru.ru_majflt;
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%-40s cpu/start %7.1f us  faults %5.1f  wall/start %7.1f us\n", argv[4] + (argc>4 ? 0:0), cpu / n, (double)flt / n, ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e3 / n);
  return 0;
}
