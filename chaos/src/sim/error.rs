//! The error of building or restarting a simulated master: only its embedded Lua can fail, and
//! only when the process is out of memory or the engine's setup is broken.

/// A simulated master could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The Lua state could not be set up.
    #[error("simulated master: Lua setup failed: {0}")]
    Lua(String),
}

impl From<mlua::Error> for SimError {
    fn from(e: mlua::Error) -> Self {
        SimError::Lua(e.to_string())
    }
}
