//! The error of building or restarting a simulated master (only its embedded Lua can fail, and
//! only when the process is out of memory or the engine's setup is broken), or of setting up a
//! simulated run around it.

/// A simulated master could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The Lua state could not be set up.
    #[error("simulated master: Lua setup failed: {0}")]
    Lua(String),
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

impl From<mlua::Error> for SimError {
    fn from(e: mlua::Error) -> Self {
        SimError::Lua(e.to_string())
    }
}
