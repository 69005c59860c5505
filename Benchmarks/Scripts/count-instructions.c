// Counts the user-space instructions a program executes between two markers, in every thread,
// by single-stepping it with ptrace. For machines where `perf stat` has no hardware counters
// and valgrind cannot run Swift programs (both true of the shared 2-core machines Orderly is
// measured on: valgrind 3.19 crashes as a Swift program starts its second thread).
//
//   cc -O2 -o count-instructions count-instructions.c
//   ./count-instructions COMMAND [ARGUMENTS...]
//
// The program runs at full speed, with ORDERLY_INSTRUCTION_MARKERS=1 in its environment, until
// one of its threads raises SIGTRAP (the `ratios` harness does so around each measured body when
// it sees that variable). From then on every thread is single-stepped and each instruction is
// counted, until the next raised SIGTRAP. The markers are swallowed. (SIGTRAP because libdispatch
// blocks SIGUSR1 and most others in its worker threads, where Swift's tasks run; a raised one is
// told from a single step's trap by its `si_code`.) For each region it prints
// `region N: I instructions, B in the busiest thread` on stderr; it exits with the program's
// status. The busiest thread's count leaves out threads that only wake up, look for work and
// sleep again, which a loaded machine makes more of.
//
// A step costs tens of microseconds on a virtual machine: keep a region to a few million
// instructions (Benchmarks/Scripts/instructions-per-job.sh runs two job counts and reports the
// difference per job, so the fixed cost of a region drops out).
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_THREADS 4096

static pid_t threads[MAX_THREADS];
/// Instructions each thread executed in the current region.
static uint64_t counts[MAX_THREADS];
static int threadCount = 0;
/// The most instructions one thread executed in the current region, kept when threads exit.
static uint64_t busiestExited = 0;

static void addThread(pid_t tid) {
  if (threadCount < MAX_THREADS) {
    counts[threadCount] = 0;
    threads[threadCount++] = tid;
  }
}

static void removeThread(pid_t tid) {
  for (int i = 0; i < threadCount; i++) {
    if (threads[i] == tid) {
      if (counts[i] > busiestExited) busiestExited = counts[i];
      threadCount -= 1;
      threads[i] = threads[threadCount];
      counts[i] = counts[threadCount];
      return;
    }
  }
}

static void countStep(pid_t tid) {
  for (int i = 0; i < threadCount; i++) {
    if (threads[i] == tid) {
      counts[i] += 1;
      return;
    }
  }
}

/// The most instructions one thread executed in the current region.
static uint64_t busiest(void) {
  uint64_t most = busiestExited;
  for (int i = 0; i < threadCount; i++) {
    if (counts[i] > most) most = counts[i];
  }
  return most;
}

/// Whether the thread's pending SIGTRAP was raised by the program (a marker) rather than being
/// a single step's trap.
static int isRaised(pid_t tid) {
  siginfo_t info;
  if (ptrace(PTRACE_GETSIGINFO, tid, NULL, &info) != 0) return 0;
  return info.si_code == SI_TKILL || info.si_code == SI_USER;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: count-instructions COMMAND [ARGUMENTS...]\n");
    return 2;
  }
  int gate[2];
  if (pipe(gate) != 0) {
    perror("count-instructions: pipe");
    return 2;
  }
  pid_t child = fork();
  if (child < 0) {
    perror("count-instructions: fork");
    return 2;
  }
  if (child == 0) {
    // Waits until the tracer has attached, so that the exec and every thread are traced.
    char byte;
    close(gate[1]);
    if (read(gate[0], &byte, 1) != 1) _exit(127);
    setenv("ORDERLY_INSTRUCTION_MARKERS", "1", 1);
    execvp(argv[1], argv + 1);
    fprintf(stderr, "count-instructions: cannot run %s: %s\n", argv[1], strerror(errno));
    _exit(127);
  }
  close(gate[0]);
  long options = PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL;
  if (ptrace(PTRACE_SEIZE, child, NULL, (void *)options) != 0) {
    perror("count-instructions: PTRACE_SEIZE (is ptrace allowed here?)");
    kill(child, SIGKILL);
    return 2;
  }
  addThread(child);
  if (write(gate[1], "go", 1) != 1) {
    perror("count-instructions: write");
    return 2;
  }
  close(gate[1]);

  int stepping = 0;
  int region = 0;
  uint64_t instructions = 0;
  int exitStatus = 0;
  while (threadCount > 0) {
    int status;
    pid_t tid = waitpid(-1, &status, __WALL);
    if (tid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      removeThread(tid);
      if (tid == child) {
        exitStatus = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      continue;
    }
    if (!WIFSTOPPED(status)) continue;
    int signal = WSTOPSIG(status);
    int event = status >> 16;
    int deliver = 0;
    if (event == PTRACE_EVENT_CLONE) {
      unsigned long newThread = 0;
      if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &newThread) == 0) addThread((pid_t)newThread);
    } else if (event == PTRACE_EVENT_STOP) {
      // A new thread's first stop, or the stop PTRACE_INTERRUPT asked for: resumed below in
      // the current mode.
    } else if (event != 0) {
      // Another event stop: nothing to count or deliver.
    } else if (signal == SIGTRAP && isRaised(tid)) {
      if (!stepping) {
        stepping = 1;
        instructions = 0;
        busiestExited = 0;
        for (int i = 0; i < threadCount; i++) counts[i] = 0;
        for (int i = 0; i < threadCount; i++) {
          if (threads[i] != tid) ptrace(PTRACE_INTERRUPT, threads[i], NULL, NULL);
        }
      } else {
        stepping = 0;
        region += 1;
        fprintf(stderr, "region %d: %llu instructions, %llu in the busiest thread\n", region,
                (unsigned long long)instructions, (unsigned long long)busiest());
      }
    } else if (signal == SIGTRAP) {
      if (stepping) {
        instructions += 1;
        countStep(tid);
      }
    } else {
      deliver = signal;
    }
    enum __ptrace_request resume = stepping ? PTRACE_SINGLESTEP : PTRACE_CONT;
    if (ptrace(resume, tid, NULL, (void *)(long)deliver) != 0 && errno != ESRCH) {
      perror("count-instructions: resuming a thread");
    }
  }
  if (stepping) {
    fprintf(stderr, "count-instructions: the program ended inside region %d (%llu so far)\n",
            region + 1, (unsigned long long)instructions);
  }
  return exitStatus;
}
