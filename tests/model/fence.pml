/* fence.pml -- a model of fence's token rule and the stores' check, for spin.
 *
 * What it checks: the store never admits a write of holder k once it has
 * admitted a write of a holder acquired later (k' > k), whatever the
 * interleaving of acquisitions, paused holders writing late with their old
 * tokens, TTL expiries, lost replication and a failover to a replica whose
 * clock is skewed (and back, with REJOIN).  docs/model.md has the mapping to the code, the
 * assumptions, the counterexamples and how to run it
 * (tests/model/test_model.sh runs every configuration).
 *
 * Abstractions (all integers are tiny so that the search is exhaustive):
 * - A tick of `now` is the resolution of Redis TIME (a microsecond): tokens
 *   and clocks are counted in ticks.  At most one token is issued per tick
 *   for the name (an acquisition takes a round trip; a token per
 *   microsecond is the rate where the counter starts to lead the clock,
 *   which RAISE models instead).  Time runs for TMAX ticks.
 * - Server s's clock (its TIME) is now + off[s]: one shared time, a fixed
 *   offset per server.  The promoted replica's offset is any value from
 *   BEHIND ticks behind the master's to AHEAD ticks ahead (chosen at the
 *   start, so every skew in that range is checked).
 * - Server 0 is the master, server 1 its replica.  Each keeps its own copy
 *   of the counter hash (n, run; and t with LIMIT); the replica's copy catches up with the
 *   master's at any moment the model chooses (async replication), so at the
 *   failover it may hold any earlier state of it: the writes after that are
 *   lost.  One failover: server 1 becomes the master, with its own run_id
 *   (a new incarnation); server 0 never issues again -- unless REJOIN:
 *   then server 0 (cut off, not restarted) comes back as server 1's
 *   replica (a full resync replaces its data with server 1's), and a second
 *   failover makes it the master again, with its run_id unchanged (Redis
 *   keeps a process's run_id across role changes).
 * - The lease (the owner key) is one bit on the master; its TTL may run out
 *   at any moment (a holder paused for longer than the TTL, or the key lost
 *   in the failover), and then the next holder may acquire.  A holder may
 *   write at any moment after its acquisition: before or after the
 *   expiry, the failover, or the next holders' writes (a paused holder).
 * - Holder k is the k-th acquisition (holders are numbered in the order
 *   the acquisitions happened); each has its own holder id (k) and writes at
 *   most once.  That loses no violation: the first write admitted after a
 *   newer holder's finds the mark's holder is not its own, so it needs a
 *   token above the mark, which an earlier admitted write of its own would
 *   have made impossible (the mark never goes down); and a refused write
 *   changes nothing.
 *
 * Parameters (spin -DNAME=VALUE; defaults below):
 *   RULE    1 clock tokens, the new rule: max(n + 1, now) + J on a new
 *             incarnation (lib/lease/redis/issue.lua, issue 19);
 *           2 clock tokens, the old rule: max(n + 1, now + J);
 *           0 dense tokens: n + 1;
 *           3 consensus tokens (etcd, lib/lease/etcd/eissuer.c): the
 *             floor's offset + the cluster's revision, one counter that a
 *             write raises and a failover never loses (Raft commits it on
 *             a quorum before the answer, and a new leader has every
 *             committed entry); no clock is read.  The replicas' copies,
 *             LAGMAX, NOREPL and the clock offsets then change nothing
 *             the issuer reads: the model checks that they cannot matter.
 *   J       the jump (token_jump_ms), in ticks.
 *   BEHIND, AHEAD   the range of the promoted replica's clock offset
 *           relative to the master's, in ticks.
 *   LAGMAX  a failover happens only when the promoted server's copy of n
 *           is at most LAGMAX below the highest token issued (255: no
 *           bound).
 *   NOREPL  1: the replica never receives the counter (it stays missing).
 *   LIMIT   L > 0: clock_behind_limit_ms, in ticks: the counter records t,
 *           the issuing server's clock, and an acquisition on a server
 *           whose clock reads more than L earlier than the counter's t is
 *           refused, writing nothing (FENCE_ECLOCK).  0: no limit (the
 *           default; the lag is then only reported, which changes nothing
 *           here, so t is not modelled).
 *   HASCOPY 1: the first failover happens only once the replica's copy
 *           holds a token issued in the model (and so its t).
 *   REJOIN  1: the old master rejoins as a replica and is promoted again
 *           (above).
 *   FRESHID 1 (with REJOIN): the second promotion gives server 0 a new
 *           identity, as if the counter's run recorded something that
 *           changes at every promotion (master_replid does) -- a fix the
 *           code does not have.
 *   RAISE   R > 0: the master's counter may be raised once to its clock +
 *           R (fence_token_raise / a reissue's floor past the clock), so
 *           the tokens after it lead the clock by R.
 *   STRICT  1: also assert that every token issued is above every token
 *           issued before (tokens never repeat or go back: stronger than
 *           the store property, which an equal token cannot break).
 *   NH      holders (acquisitions); TMAX ticks of time.
 */

#ifndef RULE
#define RULE 1
#endif
#ifndef J
#define J 2
#endif
#ifndef BEHIND
#define BEHIND 0
#endif
#ifndef AHEAD
#define AHEAD 0
#endif
#ifndef LAGMAX
#define LAGMAX 255
#endif
#ifndef NOREPL
#define NOREPL 0
#endif
#ifndef REJOIN
#define REJOIN 0
#endif
#ifndef FRESHID
#define FRESHID 0
#endif
#ifndef HASCOPY
#define HASCOPY 0
#endif
#ifndef LIMIT
#define LIMIT 0
#endif
#ifndef RAISE
#define RAISE 0
#endif
#ifndef STRICT
#define STRICT 0
#endif
#ifndef NH
#define NH 3
#endif
#ifndef TMAX
#define TMAX 4
#endif

#include "store.pml"

#define NEW_RULE 1
#define OLD_RULE 2
#define DENSE 0
#define CONSENSUS 3
#define NONE 0 /* no run: the counter is missing (or was never written) */

byte now;            /* the shared time, in ticks */
byte off[2];         /* each server's clock offset: TIME = now + off */
byte runid[2];       /* each server's run_id (INFO server) */
byte cn[2];          /* each server's copy of the counter's n */
byte crun[2];        /* ... and of its run (NONE: missing) */
#if LIMIT
byte ct[2];          /* ... and of its t (0: none) */
#define COPY_T(to, from) ct[to] = ct[from]
/* acquire.lua: refused when t - now > the limit (no t: never) */
#define CLOCK_OK (ct[master] <= now + off[master] + LIMIT)
#else
#define COPY_T(to, from) skip
#define CLOCK_OK true
#endif
byte master;         /* the server that issues tokens */
byte phase;          /* 0: server 0 master, 1 its replica; 1: after the
                      * failover, server 1 master (server 0 cut off);
                      * REJOIN: 2: server 0 is server 1's replica; 3: after
                      * the second failover, server 0 master again */
bool held;           /* the owner key exists on the master */
bool issued;         /* a token was issued in this tick */
bool raised;         /* the raise happened */
byte nacq;           /* acquisitions so far (the last holder's number) */
byte tok[NH + 1];    /* holder k's token (0: not acquired yet) */
byte mark;           /* the store's mark for the resource (0: none) */
byte markh;          /* the holder recorded with the mark (0: none) */
byte newest;         /* the newest holder whose write was admitted */
byte top;            /* the highest token issued */
#if RULE == CONSENSUS
byte rev;            /* the cluster's revision (committed: survives failovers) */
byte foff;           /* the name's floor offset (the floor key) */
#endif

inline max2(a, b, r) {
  if
  :: a >= b -> r = a
  :: else -> r = b
  fi
}

/* acquire.lua issue(): the token for the next holder, on the master m.
 * clk is the server's TIME; a counter whose run is not this server's
 * run_id (missing, or written by another incarnation) gets the jump. */
inline issue(m, t) {
  clk = now + off[m];
#if RULE == CONSENSUS
  rev++;                               /* the acquire txn's put */
  t = foff + rev
#elif RULE == DENSE
  t = cn[m] + 1;                       /* HSET n only: run unchanged */
#else
  if
  :: crun[m] == runid[m] -> max2(cn[m] + 1, clk, t)
  :: else ->
#if RULE == NEW_RULE
     max2(cn[m] + 1, clk, t); t = t + J
#else
     max2(cn[m] + 1, clk + J, t)
#endif
  fi;
  crun[m] = runid[m];
#if LIMIT
  ct[m] = clk;
#endif
#endif
#if RULE != CONSENSUS
  cn[m] = t
#endif
}

/* One holder: acquire (the k-th acquisition), then at any later moment
 * write once with the token it got. */
proctype holder(byte k) {
  byte clk, t, out;
end_idle:              /* never acquiring (time ran out) is a valid end */
  atomic {
    nacq == k - 1 && !held && !issued && CLOCK_OK ->
    issue(master, t);
    tok[k] = t; held = 1; issued = 1; nacq = k;
    printf("acquire: holder %d gets token %d from server %d (clock %d)\n",
           k, t, master, clk);
#if STRICT
    assert(t > top);   /* tokens never repeat or go back */
#endif
    if
    :: t > top -> top = t
    :: else
    fi;
    clk = 0; t = 0
  }
  /* The store's check (store.pml: the rule of lib/common/rule.c, which
   * fence.advance, the gate and the SQLite triggers apply): a higher
   * token raises the mark to it and this holder, an equal one from the
   * mark's holder is admitted (the mark stays what it is: the assignment
   * below changes nothing then); a lower one, or an equal one from another
   * holder, is refused. */
  atomic {
    store_rule(mark, markh, tok[k], k, out);
    if
    :: out == ST_RAISE || out == ST_ADMIT ->
       printf("write: holder %d token %d admitted (mark was %d of holder %d)\n",
              k, tok[k], mark, markh);
       /* THE PROPERTY: no newer holder's write was admitted before. */
       assert(k >= newest);
       newest = k;
       mark = tok[k]; markh = k
    :: else ->
       printf("write: holder %d token %d refused (mark %d of holder %d)\n",
              k, tok[k], mark, markh)
    fi;
    out = 0
  }
}

/* Everything that is not a holder: time, replication, TTL expiry, the
 * raise, the failover. */
active proctype world() {
  byte s;
  atomic {
    runid[0] = 1; runid[1] = 2;
    /* The master's clock starts at BEHIND + 1 (so that no offset is
     * negative and the master's first token, max(0 + 1, clock), follows
     * its clock); the replica's is any offset in [-BEHIND, +AHEAD]. */
    off[0] = BEHIND + 1;
    s = 1;
    do
    :: s < BEHIND + AHEAD + 1 -> s++
    :: break
    od;
    off[1] = s;
    /* Steady state: the master has issued tokens before (its run_id is
     * on the counter, n = 0 is below its clock), and the replica has
     * that counter -- unless NOREPL: it never got it. */
    crun[0] = runid[0];
#if !NOREPL
    crun[1] = runid[0];
#endif
    s = 1;
    do
    :: s <= NH -> run holder(s); s++
    :: else -> break
    od;
    s = 0
  }
end_world:             /* nothing left to do is a valid end */
  do
  :: atomic { now < TMAX -> now++; issued = 0 }
  :: atomic { held -> held = 0; printf("the lease expires\n") }
#if !NOREPL && RULE != CONSENSUS
  :: atomic {
       phase == 0 && (cn[1] != cn[0] || crun[1] != crun[0]) ->
       cn[1] = cn[0]; crun[1] = crun[0]; COPY_T(1, 0);
       printf("replication: the replica's counter is n=%d run=%d\n", cn[1], crun[1])
     }
#endif
#if RAISE && RULE == CONSENSUS
  :: atomic {
       !raised ->
       raised = 1;
       /* fence token raise: the floor so that the next token is above
        * the master's clock + RAISE (eissuer.c, raised_off) */
       if
       :: now + off[master] + RAISE > foff + rev -> foff = now + off[master] + RAISE - rev
       :: else
       fi;
       printf("raise: the floor is %d (revision %d, clock %d)\n", foff, rev, now + off[master])
     }
#elif RAISE
  :: atomic {
       phase == 0 && !raised ->
       raised = 1;
       max2(cn[0], now + off[0] + RAISE, s);
       cn[0] = s; s = 0;               /* token_raise.lua: HSET n only */
       printf("raise: the master's counter is raised to n=%d (clock %d)\n",
              cn[0], now + off[0])
     }
#endif
  :: atomic {
       phase == 0 && top <= cn[1] + LAGMAX && (!HASCOPY || cn[1] > 0) ->
       phase = 1; master = 1;
#if LIMIT
       printf("failover: server 1 (clock offset %d from the master's) is the master, its counter n=%d run=%d t=%d\n",
              off[1] - off[0], cn[1], crun[1], ct[1])
#else
       printf("failover: server 1 (clock offset %d from the master's) is the master, its counter n=%d run=%d\n",
              off[1] - off[0], cn[1], crun[1])
#endif
     }
#if REJOIN && RULE == CONSENSUS
  :: atomic {
       phase == 1 ->
       phase = 3; master = 0;
       printf("failover: server 0 (back) is the leader again\n")
     }
#elif REJOIN
  :: atomic {
       phase == 1 ->
       phase = 2; cn[0] = cn[1]; crun[0] = crun[1]; COPY_T(0, 1);
       printf("rejoin: server 0 resyncs from server 1: its counter is n=%d run=%d\n", cn[0], crun[0])
     }
  :: atomic {
       phase == 2 && (cn[0] != cn[1] || crun[0] != crun[1]) ->
       cn[0] = cn[1]; crun[0] = crun[1]; COPY_T(0, 1);
       printf("replication: server 0's counter is n=%d run=%d\n", cn[0], crun[0])
     }
  :: atomic {
       phase == 2 && top <= cn[0] + LAGMAX ->
       phase = 3; master = 0;
#if FRESHID
       runid[0] = 3;
#endif
#if LIMIT
       printf("failover: server 0 (run_id %d) is the master again, its counter n=%d run=%d t=%d\n",
              runid[0], cn[0], crun[0], ct[0])
#else
       printf("failover: server 0 (run_id %d) is the master again, its counter n=%d run=%d\n",
              runid[0], cn[0], crun[0])
#endif
     }
#endif
  od
}
