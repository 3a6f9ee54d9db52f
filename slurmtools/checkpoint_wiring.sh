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
# The promise and the requeue request are files in a folder made for each run with `mktemp -d` (mode 0700, a name
# nobody can guess) and handed to the step as SLURMTOOLS_SIGNAL_PROMISE and SLURMTOOLS_REQUEUE_MARKER; either
# counts only when it is a plain file (never a symlink) of the job's user in a folder of that user that group and
# others cannot write. At a shared, predictable path in /tmp another user could plant them (issue 12): the job
# then requeued itself at the end of every run, or a program got a signal that killed it.

_slurmtools_warning() {  # trap handler: builtins only; the work happens in _slurmtools_pass_warning
    _slurmtools_held=$1
}

_slurmtools_pass_warning() {  # runs after the trap, in normal code: may start programs
    if [ "$1" != "$_slurmtools_signal" ]; then
        echo "slurmtools: SIG$1 ignored: the checkpoint warning signal of this job is SIG$_slurmtools_signal" >&2
        return
    fi
    if [ "${SLURMTOOLS_FORWARD_SIGNAL:-0}" != 1 ] && [ -n "$(_slurmtools_marker_why "$_slurmtools_promise")" ]; then
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

_slurmtools_marker_why() {  # why the marker file $1 is not to be trusted; nothing when it is (normal code only)
    local f=$1 d
    [ -n "$f" ] || { echo "no marker place"; return; }
    if [ -L "$f" ] || [ ! -f "$f" ]; then
        echo "not a plain file${f:+ ($f)}"
        return
    fi
    if [ ! -O "$f" ]; then
        echo "$f is owned by uid $(stat -c %u -- "$f"), not this job's user (uid $(id -u))"
        return
    fi
    d=$(dirname -- "$f")
    _slurmtools_folder_why "$d"
}

_slurmtools_folder_why() {  # why folder $1 may hold files of other users; nothing when only this user can write
    local d=$1 m
    if [ -L "$d" ] || [ ! -d "$d" ]; then
        echo "its folder $d is not a folder of its own (a symlink?)"
    elif [ ! -O "$d" ]; then
        echo "its folder $d is owned by uid $(stat -c %u -- "$d"), not this job's user (uid $(id -u))"
    else
        m=$(stat -c %a -- "$d")
        if (( 8#$m & 8#022 )); then
            echo "its folder $d is writable by group or others (mode $m)"
        fi
    fi
}

slurmtools_run() {
    # this run's private folder for the promise and the requeue request (see the header); a place the script set
    # itself is used instead, from a clean start
    local private
    private=$(mktemp -d "${TMPDIR:-/tmp}/slurmtools-run.XXXXXXXXXX") || {
        echo "slurmtools: no private folder in ${TMPDIR:-/tmp}: the program cannot promise to handle the warning" \
             "signal nor ask for a requeue" >&2
        private=
    }
    _slurmtools_promise="${SLURMTOOLS_SIGNAL_PROMISE:-${private:+$private/handles-signal}}"
    local marker="${SLURMTOOLS_REQUEUE_MARKER:-${private:+$private/requeue}}"
    if [ -n "${SLURMTOOLS_SIGNAL_PROMISE:-}" ]; then  # a previous run's promise is not this run's
        rm -f -- "$SLURMTOOLS_SIGNAL_PROMISE" 2>/dev/null || :
    fi
    if [ -n "${SLURMTOOLS_REQUEUE_MARKER:-}" ]; then
        rm -f -- "$SLURMTOOLS_REQUEUE_MARKER" 2>/dev/null || :
    fi
    _slurmtools_held=
    _slurmtools_signal="${SLURMTOOLS_CHECKPOINT_SIGNAL:-URG}"
    _slurmtools_signal="${_slurmtools_signal#SIG}"
    case "$_slurmtools_signal" in
        URG|USR1|USR2) ;;
        *)  echo "slurmtools: SLURMTOOLS_CHECKPOINT_SIGNAL=$_slurmtools_signal is not a usable checkpoint signal" \
                 "(URG, USR1 or USR2): the job is not started" >&2
            return 2 ;;
    esac
    SLURMTOOLS_SIGNAL_PROMISE=$_slurmtools_promise SLURMTOOLS_REQUEUE_MARKER=$marker "$@" &
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
    if [ -n "$_slurmtools_promise" ]; then
        rm -f -- "$_slurmtools_promise" 2>/dev/null || :
    fi
    if [ -n "${SLURM_JOB_ID:-}" ] && [ -n "$marker" ] && { [ -e "$marker" ] || [ -L "$marker" ]; }; then
        local why
        why=$(_slurmtools_marker_why "$marker")
        if [ -z "$why" ]; then
            rm -f -- "$marker"
            # an array task by ARRAYJOB_TASK: the array's own id would requeue every task of the array
            local ref="$SLURM_JOB_ID"
            [ -n "${SLURM_ARRAY_TASK_ID:-}" ] && [ -n "${SLURM_ARRAY_JOB_ID:-}" ] && ref="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
            echo "slurmtools: requeueing job $ref as the training step asked" >&2
            scontrol requeue "$ref"
        else
            echo "slurmtools: requeue marker ignored, job $SLURM_JOB_ID not requeued: $why" >&2
        fi
    fi
    if [ -n "$private" ]; then
        rm -rf -- "$private"
    fi
    return "$rc"
}
