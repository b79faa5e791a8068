//! Verification of written data: the map of every acknowledged write ([`verify`]), the journal
//! of writes in flight that explains them after a crash ([`journal`]), the keeper that saves
//! the map after a flush ([`keeper`]), and the pass that reads every block back.

mod intents;
pub mod journal;
pub mod keeper;
pub mod verify;
