//! The checks of a coordinator's configuration that need the parts it
//! configures: declared schedules against the scheduler's rules (cron
//! fields, time zones, payload size), a PostgreSQL URL against the store's
//! parser. The config itself knows neither, so start-up code runs them as
//! it loads the config, and their errors name key and file like the
//! config's own.

use crate::config::{self, ConfigError, CoordinatorConfig, CoordinatorOptions, Invalid, StoreKind};
use crate::scheduler::schedule::{validate, SpecLimits};
use crate::store::postgres::PgTarget;
use std::path::Path;

/// Loads a coordinator's config from `file` and `flags` (flags win) and
/// checks all of it.
pub fn load_config(
    file: Option<&Path>,
    flags: CoordinatorOptions,
) -> Result<CoordinatorConfig, ConfigError> {
    config::load_checked(file, flags, check)
}

/// Every declared schedule is one the scheduler accepts (the key is
/// `schedule.NAME.FIELD`), and a PostgreSQL URL parses (without
/// connecting; the error never repeats the password).
pub fn check(config: &CoordinatorConfig) -> Result<(), Invalid> {
    let limits = SpecLimits {
        max_payload_bytes: config.max_payload_bytes,
    };
    for declared in &config.schedule {
        let key = |field: &str| format!("schedule.{}.{field}", declared.name);
        let spec = declared
            .to_spec()
            .map_err(|(field, reason)| (key(field), reason))?;
        validate(&spec, limits).map_err(|e| (key(e.field), e.reason))?;
    }
    if config.store == StoreKind::Postgres {
        PgTarget::parse(config.postgres_url.expose())
            .map_err(|reason| ("postgres-url".to_string(), reason))?;
    }
    Ok(())
}
