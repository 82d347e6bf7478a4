// The time a stopped run has, and how it is shared out. Concourse sends SIGKILL 10 s after the
// stop signal (SPEC §7); everything a stop lets finish or start must fit before that, so every
// layer takes its share from here and test/unit/stop-budget.test.ts checks that the shares add up.

/** Concourse's SIGKILL follows the stop signal by this long. */
export const KILL_AFTER_MS = 10_000;

/**
 * How long a claim's push already under way may go on after the stop. A server that has the pack
 * moves the branch even if the client hangs up (git daemon with a slow pre-receive hook does), so
 * killing the push could land a claim after the compensating release looked for it. Letting it
 * finish tells us whether there is anything to release (lock/lock-pool.ts).
 */
export const PUSH_GRACE_MS = 3_000;

/**
 * How long git and its helpers get to clean up their lock files after SIGINT before SIGKILL
 * (git/git.ts).
 */
export const GIT_KILL_GRACE_MS = 300;

/**
 * How long a stopped put tries to take itself out of the waiting line. Concourse waits for the
 * step to end, and a put that claimed nothing must end within a second; an entry left behind is
 * taken out by the puts behind it (lock/waiting-line.ts, goneAfterMs).
 */
export const LEAVE_AFTER_STOP_MS = 600;

/**
 * How long a cancelled command may take to wind down before the compensating release (main.ts).
 * Git and its helpers get SIGINT at once and SIGKILL GIT_KILL_GRACE_MS later, so it normally
 * settles within tens of milliseconds; only a claim's push already under way may take up to
 * PUSH_GRACE_MS.
 */
export const SETTLE_MS = PUSH_GRACE_MS + 500;

/** The compensating release's deadline after a stop (main.ts gives it to every abort task). */
export const ABORT_BUDGET_MS = 5_000;

/** Whatever happens, the process exits this long after the stop signal, before the SIGKILL. */
export const HARD_EXIT_MS = 9_000;

/**
 * After the stop: how long an SSH connection outlives its last command (transport/ssh-mux.ts).
 * Short, since the run is ending; not nothing, since the few commands a stop lets finish or start
 * (a claim's push under its grace, the put leaving the waiting line, the compensating release)
 * would otherwise each pay a new handshake.
 */
export const SSH_STOPPED_IDLE_MS = 1_000;

/**
 * The compensating release after a run that failed rather than stopped (run/abandoned-claim.ts):
 * no signal is pressing, but the remote may be down. Not a share of the stop: a stop during it
 * waits for it, and the hard exit still comes at HARD_EXIT_MS.
 */
export const FAILURE_RELEASE_MS = 20_000;
