//! The error of setting up a simulated run: one of its masters could not be built, or the
//! runtime or a client around them.

use super::master::MasterError;

/// A simulated run could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A simulated master could not be built or restarted.
    #[error(transparent)]
    Master(#[from] MasterError),
    /// The single-threaded runtime on the paused clock could not be built.
    #[error("simulation: cannot build the runtime: {0}")]
    Runtime(String),
    /// A simulated client could not be built (its configuration was refused).
    #[error("simulation: client {client} could not be built: {message}")]
    Client {
        /// The client.
        client: usize,
        /// Why.
        message: String,
    },
}
