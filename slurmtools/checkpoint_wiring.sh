# slurmtools checkpoint wiring for batch scripts (bash). Source it, then run the training through it:
#
#   #SBATCH --signal=B:URG@300       # warning to the BATCH SHELL 300 s before the time limit (and at preemption,
#   #SBATCH --requeue                # where slurmctld has SlurmctldParameters=preempt_send_user_signal)
#   export SLURMTOOLS_CHECKPOINT_SIGNAL=URG   # the same signal as --signal (URG, USR1 or USR2; default URG)
#   source "$(python -m slurmtools.checkpoint wiring-path 2>/dev/null || echo checkpoint_wiring.sh)"
#   slurmtools_run srun python train.py     # or: slurmtools_run python train.py
#
# Why: Slurm signals the batch shell, not the training process; bash runs a trap only after the foreground
# child ends, so the step runs in the background and the shell waits, passing signals on to it.
# The warning signal (SLURMTOOLS_CHECKPOINT_SIGNAL) reaches the program only when it has said it handles it:
# slurmtools.checkpoint leaves a promise file when it installs its handlers, or the script sets
# SLURMTOOLS_FORWARD_SIGNAL=1. It is passed on to the command the shell started and, because srun passes on only
# USR1 and USR2 to its tasks, any other warning signal (URG, the default) goes to every process of the job's steps
# through `scancel --signal` (docs/checkpoint.md, "Which signal"). USR1 or USR2 that is not the warning signal is
# never passed on. A program that did not promise keeps running instead, and at the end of the grace time Slurm
# stops it and queues it again (PreemptMode=REQUEUE), so a preempted plain program is requeued intact, never
# FAILED. Where Slurm itself requeues a preempted job that ends in its grace time (the plan sets
# SLURMTOOLS_PREEMPTED_EXIT_REQUEUED=1 for such a release), the program is stopped at the warning instead.
# TERM and INT (Slurm's own stop, scancel) are always passed on.
# The handlers use builtins only: a handler that forks (e.g. $(date)) crashed bash 5.2 during `wait`; what needs a
# program (scancel, scontrol) runs after the trap, once `wait` has returned.
# After the step ends, a requeue request left by the library (when it could not run scontrol itself, e.g. in a
# container) is carried out here with `scontrol requeue`.

_slurmtools_warning() {  # trap handler: builtins only; the work happens in _slurmtools_pass_warning
    _slurmtools_held=$1
}

_slurmtools_pass_warning() {  # runs after the trap, in normal code: may start programs
    if [ "$1" != "$_slurmtools_signal" ]; then
        echo "slurmtools: SIG$1 ignored: the checkpoint warning signal of this job is SIG$_slurmtools_signal" >&2
        return
    fi
    if [ "${SLURMTOOLS_FORWARD_SIGNAL:-0}" != 1 ] && [ ! -e "$_slurmtools_promise" ]; then
        _slurmtools_held_warning "$1"
        return
    fi
    kill -"$1" "$_slurmtools_child" 2>/dev/null
    case "$1" in
        USR1|USR2) ;;  # srun passes these on to its tasks itself
        *)  if [ -n "${SLURM_JOB_ID:-}" ] && ! scancel --signal="$1" "$SLURM_JOB_ID" 2>/dev/null; then
                echo "slurmtools: SIG$1 could not be passed on to the job's steps (scancel --signal failed)" >&2
            fi ;;
    esac
}

_slurmtools_held_warning() {  # runs after the trap, in normal code: may ask Slurm
    # Where Slurm requeues a preempted job that ends within its grace time (SLURMTOOLS_PREEMPTED_EXIT_REQUEUED=1,
    # from the plan's Slurm release), the program is stopped at once: it would lose the same work at the end of
    # the grace time, and a job still running then gets its next run requeued too (Slurm 25.11.7).
    if [ "${SLURMTOOLS_PREEMPTED_EXIT_REQUEUED:-0}" = 1 ] && [ -n "${SLURM_JOB_ID:-}" ] \
       && scontrol show job "$SLURM_JOB_ID" 2>/dev/null | grep -q 'PreemptTime=[0-9]'; then
        echo "slurmtools: SIG$1: the job is preempted and the program has not said it handles the warning: it is" \
             "stopped now, and Slurm requeues the job" >&2
        kill -TERM "$_slurmtools_child" 2>/dev/null
        return
    fi
    echo "slurmtools: SIG$1 (preemption or time-limit warning) not passed on: the program has not said it" \
         "handles it (slurmtools.checkpoint does; or SLURMTOOLS_FORWARD_SIGNAL=1); a preempted run is stopped" \
         "and requeued by Slurm when the grace time ends" >&2
}

slurmtools_run() {
    _slurmtools_promise="${SLURMTOOLS_SIGNAL_PROMISE:-${TMPDIR:-/tmp}/slurmtools-handles-signal-${SLURM_JOB_ID:-none}}"
    rm -f -- "$_slurmtools_promise"  # a previous run's promise is not this run's
    _slurmtools_held=
    _slurmtools_signal="${SLURMTOOLS_CHECKPOINT_SIGNAL:-URG}"
    _slurmtools_signal="${_slurmtools_signal#SIG}"
    case "$_slurmtools_signal" in
        URG|USR1|USR2) ;;
        *)  echo "slurmtools: SLURMTOOLS_CHECKPOINT_SIGNAL=$_slurmtools_signal is not a usable checkpoint signal" \
                 "(URG, USR1 or USR2): the job is not started" >&2
            return 2 ;;
    esac
    "$@" &
    _slurmtools_child=$!
    trap '_slurmtools_warning URG' URG
    trap '_slurmtools_warning USR1' USR1
    trap '_slurmtools_warning USR2' USR2
    trap 'kill -TERM "$_slurmtools_child" 2>/dev/null' TERM
    trap 'kill -INT "$_slurmtools_child" 2>/dev/null' INT
    local rc
    while :; do
        wait "$_slurmtools_child"
        rc=$?
        if [ -n "$_slurmtools_held" ]; then
            local sig="$_slurmtools_held"
            _slurmtools_held=
            _slurmtools_pass_warning "$sig"
        fi
        # above 128: either a trap interrupted the wait (child still alive: wait again) or the child died of a signal
        if [ "$rc" -gt 128 ] && kill -0 "$_slurmtools_child" 2>/dev/null; then
            continue
        fi
        break
    done
    if [ "$rc" -gt 128 ]; then  # the child may have ended while a trap ran: fetch its real status
        wait "$_slurmtools_child" 2>/dev/null
        local again=$?
        [ "$again" -ne 127 ] && rc=$again
    fi
    trap - URG USR1 USR2 TERM INT
    rm -f -- "$_slurmtools_promise"
    local marker="${SLURMTOOLS_REQUEUE_MARKER:-${TMPDIR:-/tmp}/slurmtools-requeue-${SLURM_JOB_ID:-none}}"
    if [ -n "${SLURM_JOB_ID:-}" ] && [ -f "$marker" ]; then
        rm -f -- "$marker"
        echo "slurmtools: requeueing job $SLURM_JOB_ID as the training step asked" >&2
        scontrol requeue "$SLURM_JOB_ID"
    fi
    return "$rc"
}
