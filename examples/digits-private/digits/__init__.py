"""digits: a Flower app that trains a small CNN on scikit-learn's bundled handwritten digits."""
