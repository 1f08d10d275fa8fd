// Records a remote audio track for the drivers: shared by the interop peer (app.js) and the
// session client (session.js).

const SAMPLE_RATE = 48000;

// Records a remote audio track at 48 kHz mono and streams it, as 16-bit PCM, to the driver
// (window.interopAudioChunk, exposed by drive.mjs), which writes it to a WAV and judges it.
export class PcmRecorder {
  constructor(mediaStreamTrack, log) {
    const stream = new MediaStream([mediaStreamTrack]);
    // Chromium feeds a remote WebRTC track into WebAudio only while a media element plays it.
    this.element = new Audio();
    this.element.srcObject = stream;
    this.element.play().catch((error) => log(`audio element play(): ${error.message}`));
    this.context = new AudioContext({ sampleRate: SAMPLE_RATE });
    this.context.resume();
    const source = this.context.createMediaStreamSource(stream);
    // ScriptProcessor is deprecated, but it needs no separate worklet module, and its callback
    // granularity (85 ms) does not matter here.
    const processor = this.context.createScriptProcessor(4096, 1, 1);
    this.pending = [];
    this.samples = 0;
    processor.onaudioprocess = (event) => {
      const input = event.inputBuffer.getChannelData(0);
      const pcm = new Int16Array(input.length);
      for (let i = 0; i < input.length; i++) pcm[i] = Math.max(-32768, Math.min(32767, Math.round(input[i] * 32767)));
      this.pending.push(pcm);
      this.samples += pcm.length;
    };
    source.connect(processor);
    processor.connect(this.context.destination); // a processor only runs when connected to a sink
  }

  get seconds() {
    return this.samples / SAMPLE_RATE;
  }

  // Hands everything recorded since the last flush to the driver.
  async flush() {
    const chunks = this.pending.splice(0);
    if (!chunks.length) return;
    const pcm = new Int16Array(chunks.reduce((n, c) => n + c.length, 0));
    let offset = 0;
    for (const chunk of chunks) {
      pcm.set(chunk, offset);
      offset += chunk.length;
    }
    const bytes = new Uint8Array(pcm.buffer);
    let binary = '';
    for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    await window.interopAudioChunk(btoa(binary));
  }

  stop() {
    this.element.srcObject = null;
    this.context.close();
  }
}
