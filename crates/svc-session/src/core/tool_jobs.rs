//! Server tools that run on an outside backend (`web_search`, the vision tools): each call is a
//! background job the shell runs ([`Output::RunTool`]) while the session goes on. At most
//! [`MAX_TOOL_JOBS`] run per session (one more is answered `busy` at once); a job unanswered
//! after [`TOOL_JOB_BACKSTOP`] is answered `timeout` and aborted ([`Output::AbortTool`]); the
//! model abandoning the call aborts it too, and the session's end aborts every job (the shell
//! drops them with the actor). Every call gets exactly one answer upstream and one `tool-result`.

use svc_tools::ToolError;

// The parent's types and imports: this file only adds methods by concern.
use super::*;

/// Most backend jobs one session runs at once.
pub const MAX_TOOL_JOBS: usize = 4;
/// A job that has not finished this long after it started is answered `timeout` (the HTTP shell
/// gives up after 15 s; this catches everything else).
pub const TOOL_JOB_BACKSTOP: Duration = Duration::from_secs(30);

/// A backend job for the shell to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolJob {
    /// The model's call id (the job's id as well).
    pub call_id: String,
    /// Which tool.
    pub tool: ServerTool,
    /// The model's arguments.
    pub arguments: Value,
    /// The latest fresh frame, for the vision tools.
    pub frame: Option<svc_tools::Frame>,
}

/// How a job ended, as the shell reports it.
pub type ToolJobOutcome = Result<svc_tools::ToolOutput, ToolError>;

/// The jobs running: call id → (tool, backstop deadline).
#[derive(Debug, Default)]
pub(super) struct RunningJobs {
    jobs: BTreeMap<String, (ServerTool, Instant)>,
}

impl RunningJobs {
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.jobs.values().map(|(_, deadline)| *deadline).min()
    }
}

impl SessionCore {
    /// Starts (or refuses) a backend job for the model's call; the `tool-call` and
    /// `tool-dispatch-started` events are out already.
    pub(super) fn start_tool_job(&mut self, now: Instant, call_id: String, tool: ServerTool, arguments: Value) {
        if self.tool_jobs.jobs.len() >= MAX_TOOL_JOBS {
            self.answer_tool_job(now, call_id, tool, Err(ToolError::Busy));
            return;
        }
        let frame = match tool.backend() {
            Some(svc_domain::tools::ToolBackend::Vision) => match &self.latest_image {
                Some((at, mime, data)) if *at + FRESH_FRAME > now => {
                    Some(svc_tools::Frame { mime: mime.clone(), data: data.clone() })
                }
                _ => {
                    self.answer_tool_job(now, call_id, tool, Err(ToolError::NoVideoFrame));
                    return;
                }
            },
            _ => None,
        };
        self.tool_jobs.jobs.insert(call_id.clone(), (tool, now + TOOL_JOB_BACKSTOP));
        self.timeline(now, "tool.job_started", json!({"tool_call_id": call_id, "name": tool.as_str()}));
        self.outputs.push_back(Output::RunTool(ToolJob { call_id, tool, arguments, frame }));
    }

    /// A job the shell ran has ended. An outcome for a job already answered (timed out, the
    /// model abandoned it, the session ended) is dropped.
    pub fn handle_tool_job_done(&mut self, now: Instant, call_id: &str, outcome: ToolJobOutcome) {
        if self.phase == Phase::Finished {
            return;
        }
        let Some((tool, _)) = self.tool_jobs.jobs.remove(call_id) else { return };
        self.answer_tool_job(now, call_id.to_owned(), tool, outcome);
        self.after(now);
    }

    /// Answers jobs past their backstop with `timeout`, and aborts them.
    pub(super) fn expire_tool_jobs(&mut self, now: Instant) {
        let due: Vec<(String, ServerTool)> = self
            .tool_jobs
            .jobs
            .iter()
            .filter(|(_, (_, deadline))| *deadline <= now)
            .map(|(call_id, (tool, _))| (call_id.clone(), *tool))
            .collect();
        for (call_id, tool) in due {
            self.tool_jobs.jobs.remove(&call_id);
            self.outputs.push_back(Output::AbortTool { call_id: call_id.clone() });
            self.answer_tool_job(now, call_id, tool, Err(ToolError::Timeout));
        }
    }

    /// The model abandoned these calls: their jobs stop, unanswered (the upstream wants no
    /// answer for a cancelled call).
    pub(super) fn cancel_tool_jobs(&mut self, call_ids: &[String]) {
        for call_id in call_ids {
            if self.tool_jobs.jobs.remove(call_id).is_some() {
                self.outputs.push_back(Output::AbortTool { call_id: call_id.clone() });
            }
        }
    }

    /// The session ends: every job stops (their calls are answered by the adapter's close).
    pub(super) fn abort_tool_jobs(&mut self) {
        for call_id in std::mem::take(&mut self.tool_jobs.jobs).into_keys() {
            self.outputs.push_back(Output::AbortTool { call_id });
        }
    }

    fn answer_tool_job(&mut self, now: Instant, call_id: String, tool: ServerTool, outcome: ToolJobOutcome) {
        let (ok, summary, output) = match outcome {
            Ok(done) => (true, done.summary, done.result),
            Err(error) => (false, error.code().to_owned(), error.to_result()),
        };
        let mut data = json!({"tool_call_id": call_id, "name": tool.as_str(), "ok": ok, "summary": summary});
        if ok && self.cfg.session.store.transcript {
            data["result"] = output.clone();
        }
        self.timeline(now, "tool.server", data);
        self.provider(ProviderInput::ToolResult { call_id: call_id.clone(), output, is_error: !ok, scheduling: None });
        self.emit(ServerEvent::ToolResult { tool_call_id: call_id, ok, summary: Some(summary) }, None);
    }
}
