//! The mechanisms, each written once and each taking only what it needs: the round driver, release,
//! the retry loop and its policies, the watchdog, the pub/sub hub, the masters' health, fencing
//! repair, a held lock's shared state, the local queue, background tasks, the fan-out tool and the
//! checked configuration.

pub(crate) mod background;
pub(crate) mod coalesce;
pub mod config;
pub(crate) mod fanout;
pub(crate) mod fencing;
pub(crate) mod handoff;
pub(crate) mod health;
pub(crate) mod lease;
pub(crate) mod ops;
pub(crate) mod pubsub;
pub(crate) mod release;
pub(crate) mod removal;
pub(crate) mod retry;
pub(crate) mod round;
pub(crate) mod watchdog;
