"""A user's app image: their package installed on top of the project's image (``streamapp image build``).

- ``plan``: pure decisions. What a wheel requires (``read_wheel``), whether the base image can satisfy it
  (``requirement_problems``: another ``streamapp-runtime`` than the image's is refused), and the Dockerfile that
  installs it (``dockerfile``).
- ``tools``: the one seam with side effects: building a wheel from a project folder (uv or pip), asking the base
  image what it has installed (buildah), and ``podman build``.
"""
