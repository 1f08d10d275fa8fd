//! Nothing here: the rules are in `tests/tidy.rs`, which reads the workspace's manifests and
//! sources and checks them against what ARCHITECTURE.md states.
