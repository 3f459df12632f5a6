"""Course authoring: notebook sources, build, release gates, the GPU nbval run,
specimen submissions for tests and benchmarks."""
