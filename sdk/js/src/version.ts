/** The name this SDK stamps on every session start (`sdk.name`, `X-Svc-SDK`). */
export const SDK_NAME = 'svc-js';
/** Its version; `package.json` carries the same (a test holds them together). */
export const SDK_VERSION = '0.1.0';
