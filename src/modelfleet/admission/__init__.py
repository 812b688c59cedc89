"""The RolloutSlots entity (issue 22, admission control): a fleet-wide bound on concurrent
rollouts. ``state`` holds the pure decisions (who holds a slot, who waits, in which order),
``workflow`` the one workflow that carries them out."""
