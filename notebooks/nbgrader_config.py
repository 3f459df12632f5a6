"""nbgrader's configuration for the learner's notebooks folder, deliberately empty.

`make lab` starts JupyterLab in this folder, and nbgrader's Lab extensions
(Validate, Assignment List) look for an nbgrader_config.py in the folder
the server started in; without one they print "No nbgrader_config.py file
found" at every start and every Validate, a warning a learner cannot act on.
A learner needs no setting: Validate runs the saved notebook with nbgrader's
defaults, exactly as before. The course's own configuration (sources,
gradebook, exchange) is autograder/nbgrader_config.py, which grading reads
from autograder/ and which this file never reaches.
"""
c = get_config()  # noqa: F821 (nbgrader's config loader defines get_config)
