// Audio levels of a MediaStreamTrack in the browser (Web Audio), for the microphone meter and the
// turn timer: RMS of the newest 1,024 samples in dBFS, sampled by the caller.

/** Below this the audio counts as silence. */
export const VOICE_THRESHOLD_DBFS = -45;

export class LevelMeter {
  private readonly context: AudioContext;
  private readonly analyser: AnalyserNode;
  private readonly source: MediaStreamAudioSourceNode;
  private readonly samples: Float32Array<ArrayBuffer>;

  constructor(track: MediaStreamTrack, context?: AudioContext) {
    this.context = context ?? new AudioContext();
    this.source = this.context.createMediaStreamSource(new MediaStream([track]));
    this.analyser = this.context.createAnalyser();
    this.analyser.fftSize = 1024;
    this.samples = new Float32Array(this.analyser.fftSize);
    this.source.connect(this.analyser);
    // Chromium pauses contexts created before a user gesture; levels are read off the graph, so
    // resuming is enough (nothing is routed to the speakers).
    void this.context.resume().catch(() => {});
  }

  /** The current level in dBFS (-100 for digital silence). */
  dbfs(): number {
    this.analyser.getFloatTimeDomainData(this.samples);
    let sum = 0;
    for (const sample of this.samples) sum += sample * sample;
    const rms = Math.sqrt(sum / this.samples.length);
    return rms > 0 ? Math.max(-100, 20 * Math.log10(rms)) : -100;
  }

  close(): void {
    this.source.disconnect();
    this.analyser.disconnect();
  }
}
