"""What a run is asked to do: the configuration's types, its TOML reading and writing, its checks before anything is fitted, and the Python API's argument checks."""
