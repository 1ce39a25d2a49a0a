//! Releasing a lock by its resource and token, without the [`Guard`](crate::Guard) that took it.
//!
//! A lock taken by one process may have to be released by another: a shell script takes the lock in
//! one step (`quorlock acquire` prints the token) and releases it in a later one. The token is the
//! only proof of ownership, so whoever has it can release the lock; the release is the same
//! compare-and-delete a guard sends, counted over all N masters with the same honest verdict.

use tracing::{field, instrument, Span};

use crate::api::client::Quorlock;
use crate::base::error::{InputError, ReleaseError, Released};
use crate::core::release::verdict;
use crate::mechanisms::ops::PlainLock;

impl Quorlock {
    /// Releases the lock on `resource` held under `token` on all N masters, as
    /// [`Guard::release`](crate::Guard::release) would, and reports how many still held it.
    ///
    /// Only the holder of `token` can release: a lock held under another token is left alone.
    ///
    /// # Errors
    /// [`ReleaseError::Input`] for an empty resource or token (nothing is sent);
    /// [`ReleaseError::Expired`] when fewer than a majority held `token`: the lock had expired (or
    /// never was taken with this token), and another holder may have touched the protected data;
    /// [`ReleaseError::Unconfirmed`] when too many masters were unreachable to tell (their keys
    /// expire with the TTL).
    #[instrument(skip_all, fields(resource = %resource, held = field::Empty))]
    pub async fn release_token(&self, resource: &str, token: &str) -> Result<Released, ReleaseError> {
        if resource.is_empty() {
            return Err(InputError::EmptyResource.into());
        }
        if token.is_empty() {
            return Err(InputError::EmptyToken.into());
        }
        let key = self.inner.names().key(resource);
        let ops = PlainLock::new(&key, token);
        let out = self.inner.release().everywhere(&ops, || {}).await;
        Span::current().record("held", out.held);
        verdict(out, resource, self.inner.masters().len(), false)
    }
}
