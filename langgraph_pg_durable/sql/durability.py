"""What an acknowledged commit survives: the settings read by `setup()` and `diagnose()`
(one statement, readable by any role), and the statement that makes a write commit with
the saver's `synchronous_commit` (see `SaverCore._preamble`)."""

from __future__ import annotations

from .columns import Columns


class DurabilityColumn(Columns):
    """The row of `READ`. A setting the role may not see is NULL; `standbys` is a JSON array
    of [application_name, state, sync_state, replay lag in seconds] per row of
    pg_stat_replication (a role without pg_read_all_stats sees all but the name as NULL)."""

    FSYNC = 0
    FULL_PAGE_WRITES = 1
    SYNCHRONOUS_COMMIT = 2
    SYNCHRONOUS_STANDBY_NAMES = 3
    IN_RECOVERY = 4
    STANDBYS = 5


SETTINGS = DurabilityColumn.names()[: DurabilityColumn.IN_RECOVERY]

# pg_settings (not current_setting()) leaves out a setting the role may not read rather
# than failing; it shows the session's values, the ones this connection commits with.
READ = f"""
SELECT {", ".join(DurabilityColumn.names())}
FROM (SELECT {", ".join(f"max(setting) FILTER (WHERE name = '{name}') AS {name}" for name in SETTINGS)}
      FROM pg_settings WHERE name IN ({", ".join(f"'{name}'" for name in SETTINGS)})) AS settings,
     pg_is_in_recovery() AS in_recovery,
     (SELECT json_agg(json_build_array(application_name, state, sync_state, extract(epoch FROM replay_lag))
                      ORDER BY application_name, pid) AS standbys
      FROM pg_stat_replication) AS replication"""

# Local to the transaction: sent in a write's flight, before its commit (the commit waits
# as this says), and gone after it, whatever the session's or the server's default.
SET_SYNCHRONOUS_COMMIT = "SELECT set_config('synchronous_commit', %(synchronous_commit)s, true)"
