# slurmtools checkpoint wiring for batch scripts (bash). Source it, then run the training through it:
#
#   #SBATCH --signal=B:USR1@300      # warning to the BATCH SHELL 300 s before the time limit (and at preemption,
#   #SBATCH --requeue                # where slurmctld has SlurmctldParameters=preempt_send_user_signal)
#   source "$(python -m slurmtools.checkpoint wiring-path 2>/dev/null || echo checkpoint_wiring.sh)"
#   slurmtools_run srun python train.py     # or: slurmtools_run python train.py
#
# Why: Slurm signals the batch shell, not the training process; bash runs a trap only after the foreground
# child ends, so the step runs in the background and the shell waits, forwarding each signal to it.
# The handlers use builtins only: a handler that forks (e.g. $(date)) crashed bash 5.2 during `wait`.
# After the step ends, a requeue request left by the library (when it could not run scontrol itself, e.g. in a
# container) is carried out here with `scontrol requeue`.

slurmtools_run() {
    "$@" &
    _slurmtools_child=$!
    trap 'kill -USR1 "$_slurmtools_child" 2>/dev/null' USR1
    trap 'kill -USR2 "$_slurmtools_child" 2>/dev/null' USR2
    trap 'kill -TERM "$_slurmtools_child" 2>/dev/null' TERM
    trap 'kill -INT "$_slurmtools_child" 2>/dev/null' INT
    local rc
    while :; do
        wait "$_slurmtools_child"
        rc=$?
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
    trap - USR1 USR2 TERM INT
    local marker="${SLURMTOOLS_REQUEUE_MARKER:-${TMPDIR:-/tmp}/slurmtools-requeue-${SLURM_JOB_ID:-none}}"
    if [ -n "${SLURM_JOB_ID:-}" ] && [ -f "$marker" ]; then
        rm -f -- "$marker"
        echo "slurmtools: requeueing job $SLURM_JOB_ID as the training step asked" >&2
        scontrol requeue "$SLURM_JOB_ID"
    fi
    return "$rc"
}
