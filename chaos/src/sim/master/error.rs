//! The error of building or restarting a simulated master: only its embedded Lua can fail, and
//! only when the process is out of memory or the engine's setup is broken. The master's own,
//! so that it needs nothing of the simulation around it; a simulated run wraps it in its
//! `SimError`.

/// A simulated master could not be built or restarted.
#[derive(Debug, thiserror::Error)]
pub enum MasterError {
    /// The Lua state could not be set up.
    #[error("simulated master: Lua setup failed: {0}")]
    Lua(String),
}

impl From<mlua::Error> for MasterError {
    fn from(e: mlua::Error) -> Self {
        MasterError::Lua(e.to_string())
    }
}
