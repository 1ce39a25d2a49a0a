//! Operations on real containers, each with its negative control: a failover to a lagging
//! replica promoted under the master's name, a runtime downgrade of persistence followed by a
//! SIGKILL and a restart, and eviction under a small `maxmemory` with a filler. Each can take a
//! held lock's key from a master while the master's own reports say nothing is wrong; quorlock's
//! defaults keep such a master out of every majority (a replaced or promoted master and a
//! restart after a downgrade for the grace, from their record; an evicting master for good), and
//! each control switches that one rule off in the probe clients, which must then be caught
//! holding at once.
//!
//! The masters are `chaos/docker/compose.operations.yml`'s; background clients with quorlock's
//! defaults contend the whole run ([`super::clients`]); two probes ([`probe`], in containers of
//! their own, [`containers`]) build the counterexample in steps on a board on the witness
//! ([`board`]), with the operation's steps ([`failover`], [`downgrade`], [`eviction`], through
//! [`reach`]) between theirs, as [`drive`] runs them; [`control`] names the controls and judges
//! them.

pub mod board;
mod containers;
pub mod control;
mod downgrade;
pub mod drive;
mod eviction;
mod failover;
pub mod probe;
mod reach;
