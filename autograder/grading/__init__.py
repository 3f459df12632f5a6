"""The grading service: collect, intake, jail, recheck, grade, gradebook,
feedback and export. Imports the checks and the course's paths, never authoring."""
