//! LiveKit's agent dispatch: `AgentDispatchService` (in `crate::twirp`), rooms' `agents` from
//! `CreateRoom`, and the agent worker protocol at `<room URL>/agent`, so LiveKit Agents workers
//! (and svc's own, later) register, are offered jobs for their `agent_name`, accept, and join.
//!
//! [`dispatcher`] is the sans-IO state machine (workers, dispatches, jobs, offers, the choice by
//! load); [`service`] its task and handle; [`socket`] the worker connections' edge.

pub(crate) mod dispatcher;
pub(crate) mod service;
pub(crate) mod socket;

pub(crate) use service::AgentDispatch;
