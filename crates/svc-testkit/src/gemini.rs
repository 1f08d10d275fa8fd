//! Placeholder.
use std::sync::Arc;
use axum::extract::ws::WebSocket;
use tokio::sync::mpsc;
use crate::{Action, Shared};
pub(crate) async fn serve(_socket: WebSocket, _shared: Arc<Shared>, _index: usize, _control: mpsc::Receiver<Action>) {}
