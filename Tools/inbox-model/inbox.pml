/*
 * A model of the queue engine's inbox protocol (Modules/OrderlyCore/Engine), checked by spin
 * over every interleaving: `bash Tools/inbox-model/check.sh`.
 *
 * What is modelled, step for step with the Swift code:
 * - producers (`JobQueueCore.admit`): a detached job waits in the inbox when the inbox is
 *   watched (`JobInbox.keepIfWatched`, under the inbox lock), else takes the queue's lock,
 *   moves the inbox's jobs into the line first (`takeAllAndNumber`), numbers its job, admits it,
 *   and settles the inbox; a job that starts at once gets a runner;
 * - runners (`JobQueueCore.drain`): run a job, then under the queue's lock end it, start the
 *   line's head (`JobLineState.advance`), settle the inbox, and go on with the started job or
 *   exit;
 * - readers (`JobQueueCore.read`, and updates that move the inbox first, such as
 *   `waitUntilIdle`): move the inbox's jobs into the line, then settle;
 * - the inbox's flag (`JobInbox.isWatched`) and the queue's copy of it
 *   (`JobLineState.inboxIsWatched`); `JobInbox.settle` opens it with a plain store and closes it
 *   only under the inbox lock with the inbox empty.
 * Locks are taken queue first, then inbox, as in the code.
 *
 * Checked: every admitted job runs exactly once, in the order of its number (FIFO, one at a
 * time: LIMIT 1), no runner exits while a job waits (at the end nothing is left in the inbox or
 * the line and every job ran), and no interleaving deadlocks (spin's invalid end states).
 *
 * Two broken variants show that the check can fail: MUTANT_FLAG_OUTSIDE_LOCK reads the flag
 * before taking the inbox lock, MUTANT_CLOSE_NONEMPTY closes the inbox with jobs in it. The
 * check script expects spin to find an error in each.
 */

#ifndef NPROD
#define NPROD 3
#endif
#ifndef NJOBS
#define NJOBS 2
#endif
#ifndef NREADERS
#define NREADERS 1
#endif
#define TOTAL (NPROD * NJOBS)
#define LIMIT 1

bit qlock = 0;
/* JobInbox.isWatched */
bit watched = 0;
/* JobLineState.inboxIsWatched: the queue's copy, under the queue's lock */
bit inboxIsWatched = 0;
chan inbox = [TOTAL] of { byte };
chan line = [TOTAL] of { byte };
byte lastID = 0;
/* jobs holding a slot */
byte running = 0;
byte lastRan = 0;
byte ranCount = 0;

/* Each critical section of the inbox lock is one atomic step: nothing else touches the inbox
   while it is held. A section under the queue's lock is split into atomic steps exactly where
   another process may act in between: around its inbox sections and its store of the flag. */

/* JobLineState.admit for a detached job, under the queue's lock: it starts at once (and the
   caller must start a runner for it, `launch`), or waits in line. */
inline admitJob(j, launch) {
  if
  :: len(line) == 0 && running < LIMIT -> running++; launch = j
  :: else -> line!j
  fi
}

/* Takes every job waiting in the inbox into `buffer`, under the inbox lock (one step). */
inline takeInbox(taken, buffer) {
  atomic {
    do
    :: nempty(inbox) -> inbox?taken; buffer!taken
    :: empty(inbox) -> break
    od
  }
}

/* Admits the taken jobs, in order, under the queue's lock. */
inline admitBuffer(taken, buffer, launch) {
  atomic {
    do
    :: nempty(buffer) -> buffer?taken; admitJob(taken, launch)
    :: empty(buffer) -> break
    od
  }
}

/* JobQueueCore.settleInbox with JobInbox.settle, under the queue's lock. */
inline settle(launch, taken, buffer, watchedNow, closed) {
  do
  :: true ->
    watchedNow = (running > 0 && len(line) > 0);
    if
    :: watchedNow ->
      /* A plain store: producers may see it from their next inbox section on. */
      watched = 1;
      inboxIsWatched = 1;
      break
    :: !watchedNow && !inboxIsWatched -> break
    :: !watchedNow && inboxIsWatched ->
      /* Under the inbox lock: close it if empty, else take its jobs. */
      atomic {
        closed = 0;
        if
#ifdef MUTANT_CLOSE_NONEMPTY
        /* Broken on purpose: the inbox closed with jobs still in it. */
        :: true -> watched = 0; closed = 1
#else
        :: empty(inbox) -> watched = 0; closed = 1
#endif
        :: nempty(inbox) ->
          do
          :: nempty(inbox) -> inbox?taken; buffer!taken
          :: empty(inbox) -> break
          od
        fi
      }
      if
      :: closed -> inboxIsWatched = 0; break
      :: else -> admitBuffer(taken, buffer, launch)
      fi
    fi
  od
}

proctype Runner(byte first) {
  byte job = first;
  byte launch;
  byte taken;
  bit watchedNow;
  bit closed;
  chan buffer = [TOTAL] of { byte };
  do
  :: true ->
    /* The job runs: one at a time, in the order of their numbers. */
    atomic {
      assert(job == lastRan + 1);
      lastRan = job;
      ranCount++
    }
    atomic {
      qlock == 0 -> qlock = 1;
      running--;
      launch = 0;
      /* JobLineState.advance */
      if
      :: len(line) > 0 && running < LIMIT -> line?launch; running++
      :: len(line) == 0 || running >= LIMIT -> skip
      fi
    }
    settle(launch, taken, buffer, watchedNow, closed);
    qlock = 0;
    if
    :: launch != 0 -> job = launch
    :: launch == 0 -> break
    fi
  od
}

proctype Producer() {
  byte k = 0;
  byte id;
  byte launch;
  byte taken;
  bit kept;
  bit startsNow;
  bit watchedNow;
  bit closed;
  chan buffer = [TOTAL] of { byte };
  do
  :: k < NJOBS ->
    k++;
    /* JobInbox.keepIfWatched: one step under the inbox lock. */
#ifdef MUTANT_FLAG_OUTSIDE_LOCK
    /* Broken on purpose: the flag read before the inbox lock is taken. */
    kept = watched;
    atomic {
      if
      :: kept -> lastID++; inbox!lastID
      :: else -> skip
      fi
    }
#else
    atomic {
      if
      :: watched -> lastID++; inbox!lastID; kept = 1
      :: else -> kept = 0
      fi
    }
#endif
    if
    :: kept -> skip
    :: !kept ->
      /* The locked path: takeAllAndNumber, admit, settle. */
      atomic { qlock == 0 -> qlock = 1; launch = 0; startsNow = 0 }
      if
      :: watched ->
        atomic {
          do
          :: nempty(inbox) -> inbox?taken; buffer!taken
          :: empty(inbox) -> break
          od;
          lastID++;
          id = lastID
        }
        admitBuffer(taken, buffer, launch)
      :: else ->
        /* The inbox is closed and only the queue's lock holder opens it: numbered here. */
        atomic { lastID++; id = lastID }
      fi;
      atomic {
        if
        :: len(line) == 0 && running < LIMIT -> running++; startsNow = 1
        :: else -> line!id
        fi
      }
      settle(launch, taken, buffer, watchedNow, closed);
      qlock = 0;
      if
      :: launch != 0 -> run Runner(launch)
      :: else -> skip
      fi;
      if
      :: startsNow -> run Runner(id)
      :: else -> skip
      fi
    fi
  :: k == NJOBS -> break
  od
}

/* A call that needs the whole line (pendingCount, waitUntilIdle): moves the inbox first. */
proctype Reader() {
  byte launch = 0;
  byte taken;
  bit watchedNow;
  bit closed;
  chan buffer = [TOTAL] of { byte };
  atomic { qlock == 0 -> qlock = 1 }
  if
  :: watched -> takeInbox(taken, buffer); admitBuffer(taken, buffer, launch)
  :: else -> skip
  fi;
  settle(launch, taken, buffer, watchedNow, closed);
  qlock = 0;
  if
  :: launch != 0 -> run Runner(launch)
  :: else -> skip
  fi
}

init {
  byte i;
  atomic {
    i = 0;
    do
    :: i < NPROD -> run Producer(); i++
    :: i == NPROD -> break
    od;
    i = 0;
    do
    :: i < NREADERS -> run Reader(); i++
    :: i == NREADERS -> break
    od
  }
  /* Every other process has ended: producers, readers, and every runner. */
  _nr_pr == 1;
  assert(ranCount == TOTAL);
  assert(lastRan == TOTAL);
  assert(empty(inbox) && empty(line));
  assert(running == 0);
}
