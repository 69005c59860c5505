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
bit ilock = 0;
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

inline lock(l) { atomic { l == 0 -> l = 1 } }
inline unlock(l) { l = 0 }

/* JobLineState.admit for a detached job, under the queue's lock: it starts at once (and the
   caller must start a runner for it, `launch`), or waits in line. */
inline admitJob(j, launch) {
  if
  :: len(line) == 0 && running < LIMIT -> running++; launch = j
  :: else -> line!j
  fi
}

/* Moves every job of the inbox into the line, in order (JobQueueCore.moveInbox / the first
   part of takeAllAndNumber), under the queue's lock. */
inline moveInbox(launch, taken, buffer) {
  if
  :: watched ->
    lock(ilock);
    do
    :: nempty(inbox) -> inbox?taken; buffer!taken
    :: empty(inbox) -> break
    od;
    unlock(ilock);
    do
    :: nempty(buffer) -> buffer?taken; admitJob(taken, launch)
    :: empty(buffer) -> break
    od
  :: else -> skip
  fi
}

/* JobQueueCore.settleInbox with JobInbox.settle, under the queue's lock. */
inline settle(launch, taken, buffer, watchedNow) {
  do
  :: true ->
    watchedNow = (running > 0 && len(line) > 0);
    if
    :: watchedNow ->
      if
      :: !inboxIsWatched -> watched = 1
      :: else -> skip
      fi;
      inboxIsWatched = 1;
      break
    :: !watchedNow && !inboxIsWatched -> break
    :: !watchedNow && inboxIsWatched ->
      lock(ilock);
      if
      :: empty(inbox) ->
        watched = 0;
        unlock(ilock);
        inboxIsWatched = 0;
        break
      :: nempty(inbox) ->
        do
        :: nempty(inbox) -> inbox?taken; buffer!taken
        :: empty(inbox) -> break
        od;
        unlock(ilock);
        do
        :: nempty(buffer) -> buffer?taken; admitJob(taken, launch)
        :: empty(buffer) -> break
        od
      fi
    fi
  od
}

proctype Runner(byte first) {
  byte job = first;
  byte launch;
  byte taken;
  bit watchedNow;
  chan buffer = [TOTAL] of { byte };
  do
  :: true ->
    /* The job runs: one at a time, in the order of their numbers. */
    assert(job == lastRan + 1);
    lastRan = job;
    ranCount++;
    lock(qlock);
    running--;
    launch = 0;
    /* JobLineState.advance */
    if
    :: nempty(line) && running < LIMIT -> line?launch; running++
    :: else -> skip
    fi;
    settle(launch, taken, buffer, watchedNow);
    unlock(qlock);
    if
    :: launch != 0 -> job = launch
    :: else -> break
    fi
  od
}

proctype Producer() {
  byte k = 0;
  byte id;
  byte launch;
  byte taken;
  bit startsNow;
  bit watchedNow;
  chan buffer = [TOTAL] of { byte };
  do
  :: k < NJOBS ->
    k++;
    /* JobInbox.keepIfWatched */
    lock(ilock);
    if
    :: watched ->
      lastID++;
      inbox!lastID;
      unlock(ilock)
    :: else ->
      unlock(ilock);
      /* The locked path: takeAllAndNumber, admit, settle. */
      lock(qlock);
      launch = 0;
      startsNow = 0;
      if
      :: watched ->
        lock(ilock);
        do
        :: nempty(inbox) -> inbox?taken; buffer!taken
        :: empty(inbox) -> break
        od;
        lastID++;
        id = lastID;
        unlock(ilock);
        do
        :: nempty(buffer) -> buffer?taken; admitJob(taken, launch)
        :: empty(buffer) -> break
        od
      :: else ->
        lastID++;
        id = lastID
      fi;
      if
      :: len(line) == 0 && running < LIMIT -> running++; startsNow = 1
      :: else -> line!id
      fi;
      settle(launch, taken, buffer, watchedNow);
      unlock(qlock);
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
  chan buffer = [TOTAL] of { byte };
  lock(qlock);
  moveInbox(launch, taken, buffer);
  settle(launch, taken, buffer, watchedNow);
  unlock(qlock);
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
