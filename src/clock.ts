/** Time, passed in as a dependency so that tests can hold it still or move it. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
