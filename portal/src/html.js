// htm bound to Preact's h: html`<div>...</div>` without a build step.
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);
