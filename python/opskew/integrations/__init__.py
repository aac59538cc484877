"""opskew.profile in training frameworks: `opskew.integrations.lightning`
(PyTorch Lightning's `Trainer(profiler=...)`, docs/lightning.md) and
`opskew.integrations.hf` (a Hugging Face `Trainer` callback,
docs/huggingface.md). Each needs its framework (`pip install
'opskew[lightning]'`, `'opskew[hf]'`); this package imports neither, and
nothing in opskew imports it."""
