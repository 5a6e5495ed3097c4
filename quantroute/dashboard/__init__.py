"""The quantroute dashboard (Streamlit). Entry script: quantroute/dashboard/app.py."""
