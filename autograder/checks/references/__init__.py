"""Reference pieces shared by more than one exercise's check: a layer below the
exercise modules (which import from here and the framework, never from each
other) and above the framework. See docs/contributing.md, "How the checks are
layered"."""
