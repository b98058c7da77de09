//! Presentation helpers both front ends share (the operations themselves are the engine's
//! front door, `tradetune_engine::front`).

pub mod number;
