"""A LiveKit Agents worker (PyPI `livekit-agents`, pinned in scripts/interop-setup.sh) against
svc's room, as LiveKit users run one: it registers at `<room URL>/agent` for `--agent-name`,
accepts the jobs it is offered under its own agent identity, joins each job's room with the token
of the assignment, says who it is (attribute `worker`, a data message on `agent.hello` with the
job's id, dispatch and metadata), and stays until the room ends or the job is terminated. With
`--voice-base-url` each job is instead a voice agent (an AgentSession on the OpenAI realtime
plugin, pointed at svc-testkit's OpenAI Realtime fake).

Run in its own venv (target/interop/agents-venv: LiveKit Agents pins its own `livekit` client);
the Rust test (crates/svc-room/tests/agents.rs) starts it and reads what the room saw.
"""

import argparse
import asyncio
import json
import logging
import os

from livekit.agents import AgentServer, JobContext, JobExecutorType, JobRequest

# Jobs run in processes of their own, which import this module: what they need of the command
# line comes through the environment.
LABEL_VARIABLE = "SVC_TEST_WORKER_LABEL"
VOICE_VARIABLE = "SVC_TEST_VOICE_BASE_URL"


async def on_request(request: JobRequest):
    label = os.environ[LABEL_VARIABLE]
    await request.accept(identity=f"agent-{label}-{request.id}", name=f"Worker {label}")


async def entrypoint(ctx: JobContext):
    label = os.environ[LABEL_VARIABLE]
    if os.environ.get(VOICE_VARIABLE):
        await voice(ctx)
        return
    await ctx.connect()
    local = ctx.room.local_participant
    await local.set_attributes({"worker": label})
    hello = {"worker": label, "job": ctx.job.id, "dispatch": ctx.job.dispatch_id, "metadata": ctx.job.metadata}
    await local.publish_data(json.dumps(hello), reliable=True, topic="agent.hello")
    # Returning leaves the agent in the room: the job runs until the room ends or the server
    # terminates it.


async def voice(ctx: JobContext):
    """A voice agent as LiveKit's examples build one: an AgentSession on the OpenAI realtime
    plugin, pointed at an OpenAI Realtime fake (the key is the fake's)."""
    from livekit.agents import Agent, AgentSession
    from livekit.plugins import openai

    await ctx.connect()
    model = openai.realtime.RealtimeModel(base_url=os.environ[VOICE_VARIABLE], api_key="test-key")
    session = AgentSession(llm=model)
    await session.start(room=ctx.room, agent=Agent(instructions="You are a helpful voice assistant."))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--agent-name", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--voice-base-url", default="", help="run a voice agent on this OpenAI Realtime fake")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    os.environ[LABEL_VARIABLE] = args.label
    os.environ[VOICE_VARIABLE] = args.voice_base_url

    server = AgentServer(
        ws_url=args.url,
        api_key=args.key,
        api_secret=args.secret,
        # A process per job, as in production (jobs in threads share the client's FFI loop).
        job_executor_type=JobExecutorType.PROCESS,
        num_idle_processes=0,
        port=0,
        # The load LiveKit compares workers by: a quarter per running job.
        load_fnc=lambda worker: min(1.0, len(worker.active_jobs) * 0.25),
    )
    server.rtc_session(entrypoint, agent_name=args.agent_name, on_request=on_request)
    asyncio.run(server.run(devmode=True))


if __name__ == "__main__":
    main()
