"""The rollout controller (`quantroute controller`): a long-running process that reconciles every unfinished
rollout every interval (guards, auto-advance, rollback, traffic made to match the desired state), delivers
webhook notifications, and records a heartbeat. Several may run; the one holding the leader lock acts."""
