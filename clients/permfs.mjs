// permfs.mjs: the ES module face of permfs.js (same contract; see there).
//   import { ask } from './clients/permfs.mjs';
import permfs from './permfs.js';

export const { ask } = permfs;
export default permfs;
