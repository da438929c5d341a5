"""Effects at the edge: the Docker engine, images and containers.

Nothing here decides a verdict. :mod:`client` connects to (and if asked, starts) the
engine; :mod:`images` builds the base → environment → instance image layers;
:mod:`sandbox` owns one container's lifecycle and executes commands in it; :mod:`cpus`
(pure) says how many cores a sandbox gets.
"""
